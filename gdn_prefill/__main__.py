"""`python -m gdn_prefill` (or `gdn-prefill`): the main job.

On a Hopper GPU: a short benchmark of every spine against FLA (when installed), checked
against the fp64 oracle, printed as a table.  Without one: says so, and shows the plan
(explain()) and an oracle self-check on the CPU.
"""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    from gdn_prefill.bench import main_job

    return main_job(argv)


if __name__ == "__main__":
    sys.exit(main())
