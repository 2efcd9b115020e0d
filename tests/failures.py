"""Print again, at the end of `make test`, the lines of a chain's log that say why a step failed.

CI keeps the head and the tail of make test's output; a molecule scenario's
failure is in the middle, often inside one long line (a failed task's result,
with the stdout of the program it ran). This finds those reasons and prints
the last few, each cut to a readable length:

- a lifecycle or faults step (``step x (...) FAILED after 12s: ...``);
- a failed task (``fatal: [host]: FAILED! => {... "msg": ...}``), its msg;
- pytest's summary lines (``FAILED tests/...::test - ...``);
- molecule's and make's own verdicts (``ERROR ...``, ``make: molecule scenario ... ran past``).

    tests/failures.py LOG NAME
"""

import re
import sys

MAX_REASONS = 12
MAX_CHARS = 900

PATTERNS = (
    # Plain, or inside a task result's JSON stdout (up to the next step or the end of that string).
    re.compile(r'step [a-z0-9]+ \([^)]*\) FAILED after [0-9]+s: (?:[^"\\]|\\.)*?(?=\\nstep |\\n"|"|$)'),
    re.compile(r"fatal: \[[^\]]+\]: FAILED! => .*"),
    re.compile(r"^FAILED \S+::\S+.*"),
    re.compile(r"^ERROR\s+(?!\s|Molecule executed).*"),
    re.compile(r"^make: molecule scenario \S+ ran past .*"),
)
MSG = re.compile(r'"msg": "((?:[^"\\]|\\.)*)"')


def unescape(text):
    return text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def reasons(lines):
    found = []
    for line in lines:
        line = line.rstrip("\n")
        for pattern in PATTERNS:
            match = pattern.search(line)
            if not match:
                continue
            text = match.group(0)
            if text.startswith("fatal:"):
                msg = MSG.search(text)
                host = text.split("]", 1)[0] + "]"
                text = "%s: %s" % (host, unescape(msg.group(1)) if msg else text)
            else:
                text = unescape(text)
            # A long reason (a site.yml run's output) keeps its start and its end, where the failed task is.
            if len(text) > MAX_CHARS:
                text = text[:MAX_CHARS // 3] + " [...] " + text[-(MAX_CHARS - MAX_CHARS // 3):]
            found.append(text)
            break
    return found[-MAX_REASONS:]


def main():
    path, name = sys.argv[1], sys.argv[2]
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = reasons(handle)
    except OSError:
        return 0
    if found:
        print("make: why %s failed (the last %d reasons in %s):" % (name, len(found), path))
        for text in found:
            print("  - " + text.replace("\n", "\n    "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
