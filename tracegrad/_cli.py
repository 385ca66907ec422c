"""The help format of tracegrad's command lines (the demo and the benchmarks): every option
with its default."""
import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    def _format_action(self, action):
        if not action.help and action.option_strings and action.nargs != 0 and \
                action.default is not argparse.SUPPRESS:
            action.help = "(default: %(default)s)"       # argparse shows nothing for an option without help
        return super()._format_action(action)
