"""The words around the plan table, for people: a footnote that explains only the columns shown, the warnings
condensed under the table, and each option's `why` with the noise of a tiny job taken out ("$0.00 less than the
next layout", the advisor's bare hazard beside the one the plan uses, a p90 "below" an expected cost it equals to
the cent). Display only: `plan -o json` keeps every word the planner wrote (scripts and saved plans read those)."""
from __future__ import annotations

import re

# What each column means, by header (the table's own two-line headers joined by a space).
_COLUMN_NOTES = {
    "wall hours": "wall hours: from launch to the last step, Spot waits and interruptions included (the deadline "
                  "is checked on these)",
    "samples/s": "samples/s: the whole layout's rate (model: estimated; measured: benched or run before; given: the "
                 "spec's)",
    "p90 $": "p90 $: 90th-percentile cost over simulated Spot runs",
    "billed hours": "billed hours: what each node is paid for",
    "$/h": "$/h: the whole layout",
    "score": "score: the Spot placement score AWS gave (1-10)",
    "interr.": "interr.: Spot interruptions expected",
    "notes": "pareto: no other option is both cheaper and faster",
}


def _cents(x: float) -> int:
    return round(x * 100)


def column_notes(shown: list[str], options) -> str:
    """The footnote: one phrase per column shown, none for a column left out."""
    notes = [_COLUMN_NOTES[h] for h in shown if h in _COLUMN_NOTES]
    if "p90 $" in shown:
        # Only where the table itself shows the difference: "$0.03 below $0.03" is not worth a word.
        below = [o.rank for o in options if o.cost_p90_usd and _cents(o.cost_p90_usd) < _cents(o.expected_cost_usd)]
        if below:
            named = ", ".join(f"#{r}" for r in below[:3]) + (f" and {len(below) - 3} more" if len(below) > 3 else "")
            notes.append(f"p90 $ below expected $ ({named}): fewer than one run in ten is interrupted there, and the "
                         "expected cost also counts the rare rework")
    return "; ".join(notes) + ("." if notes else "")


# ranking words (planner/reasons.py) whose amount rounds to nothing
_NO_LEAD = re.compile(r", \$0\.00 less (at p90 )?than the next layout \([^)]*\)")
_NO_SOONER = re.compile(r", 0\.00 h (sooner than|faster)[^,]*|, \$0\.00 cheaper")
# planner/spot/risk.py: the advisor's bare figure beside the hazard the plan uses is a detail for the model's readers
_ADVISOR_ALONE = re.compile(r"; the advisor alone says [0-9.]+/h\)")


# a bench's network regime (usecases/bench/record.py) in words: "none" is one node, nothing between nodes measured
_REGIMES = {"network none)": "one node: no network between nodes in it)",
            "network sustained)": "network at its sustained rate)",
            "network burst)": "network on fresh burst credits, which a long job will not have)",
            "network unknown)": "network past its burst credits, its rate not read)"}


def people_why(option, lines) -> list[str]:
    """The option's why lines as a person reads them: the same facts, without amounts that round to zero."""
    out = []
    for line in lines:
        line = _NO_SOONER.sub("", _NO_LEAD.sub("", line))
        line = _ADVISOR_ALONE.sub(")", line)
        for short, words in _REGIMES.items():
            line = line.replace(short, words)
        if line.startswith("$0.00 more than #1"):  # what is left after it (", 1.20 h faster") still counts
            line = "the same expected cost as #1, to the cent" + line[len("$0.00 more than #1"):]
        elif line.startswith("0.00 h slower than #1"):
            line = "as fast as #1, to the hundredth of an hour" + line[len("0.00 h slower than #1"):]
        if line.startswith("p90 below the expected cost") and option.cost_p90_usd is not None \
                and _cents(option.cost_p90_usd) >= _cents(option.expected_cost_usd):
            continue  # equal to the cent in every figure the table shows
        out.append(line)
    return out


# planner/spot/risk.py's sensitivity line: a lead that rounds to nothing (a tie, a tiny job's cents) moves nowhere
_NO_MARGIN = re.compile(r"; none moves its 0\.0% lead over the next layout by more than [0-9.]+%")


def people_warning(warning: str) -> str:
    """A plan warning as a person reads it: the same facts, without a 0.0% lead that nothing moves."""
    return _NO_MARGIN.sub("", warning)


_ASIDE = re.compile(r" ?\([^()]*\)")


def condensed(warning: str, width: int, lines: int = 2) -> tuple[list[str], bool]:
    """A warning under "warning: " in at most `lines` lines, and whether anything was left out: first its asides in
    parentheses (the sources and the lists), then, if still too long, its end, cut between words and marked. The
    whole of it is a flag away (--explain) and in `-o json`."""
    import textwrap

    indent = "warning: "

    def wrap(text: str) -> list[str]:
        return textwrap.wrap(text, width=max(40, width), initial_indent=indent, subsequent_indent=" " * len(indent),
                             break_long_words=False, break_on_hyphens=False)

    wrapped, short = wrap(warning), warning
    while len(wrapped) > lines and _ASIDE.search(short):
        short = _ASIDE.sub("", short)
        wrapped = wrap(short)
    if len(wrapped) <= lines:
        return wrapped, short != warning
    kept = wrapped[:lines]
    tail = " [...]"
    while len(kept[-1]) + len(tail) > width and " " in kept[-1].strip():
        kept[-1] = kept[-1].rsplit(" ", 1)[0]
    kept[-1] += tail
    return kept, True
