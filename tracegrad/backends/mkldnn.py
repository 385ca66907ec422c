"""torch.backends.mkldnn: oneDNN is not used by tracegrad; the flag keeps what scripts set."""

enabled = True


def is_available():
    return False
