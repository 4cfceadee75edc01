"""One rule for a test that cannot run on this machine (not root, no network to Debian's
archive, a binary not built): skip with the reason (exit 77, which meson counts as a
skip), except under CI=true, where the machine is expected to have everything and the
same reason fails the run instead of hiding a broken set-up."""
import os
import sys


def cannot_run(name, why, what="skipped"):
    """Ends the process. name: the test's name in the line; what: what is not run."""
    if os.environ.get("CI") == "true":
        print("%s: cannot run: %s (CI=true: failing, not skipping)" % (name, why),
              file=sys.stderr)
        sys.exit(1)
    print("%s: %s: %s" % (name, what, why))
    sys.exit(77)
