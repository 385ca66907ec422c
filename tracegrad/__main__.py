"""`python -m tracegrad`: the guided tour (tracegrad/tour.py)."""
from .tour import main

main()
