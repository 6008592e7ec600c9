"""The report's fixed words: methods, kinds, budget rules, glossary."""

from __future__ import annotations

__all__ = ["ALLOCATION", "CHARGE", "GLOSSARY_HEADING", "KIND_WORDS", "NO_BASELINE", "POLICY",
           "glossary", "method_words"]

GLOSSARY_HEADING = "## Glossary"

_METHODS = {
    "adpm": "rows weighted by min(ε, τ) (Chaudhuri & Courtade, *Mean Estimation Under "
            "Heterogeneous Privacy: Some Privacy Can Be Free*)",
    "uniform": "every row at the smallest ε (what a single-ε library does)",
    "proportional": "rows weighted in proportion to their ε",
    "drop": "the most private rows left out, the rest weighted equally",
}
_CORRELATED = ("weights chosen from the ε levels only (Chaudhuri & Courtade, *Private "
               "Estimation When Data and Privacy Demands Are Correlated*)")


_LOCAL_BASELINE = ("the local-DP baseline: what per-row randomized reports, each at its own "
                   "ε and reweighted, would give (Chaudhuri & Courtade, *Private Estimation "
                   "When Data and Privacy Demands Are Correlated*)")


def method_words(method: str | None) -> str:
    """A method id in words (with its paper)."""
    if method is None:
        return ""
    if method.startswith(("ldp-", "k-rappor")):
        return _LOCAL_BASELINE
    return _METHODS.get(method, _CORRELATED if method.startswith(("hpm", "hpf")) else method)



NO_BASELINE = {
    "mean": "No single-ε comparison: no group has rows with a positive, finite ε.",
    "histogram": "No single-ε comparison: no group has rows with a positive, finite ε.",
    "user_mean": "No single-ε comparison is shown for the user-level average (no single-ε "
                 "user-level baseline is computed here).",
    "heavy_hitters": "No single-ε comparison: this release gives every person the same ε "
                     "already.",
    "attribute_histograms": "No single-ε comparison: this release gives every person the "
                            "same ε already.",
    "marginals": "No single-ε comparison: this release gives every person the same ε already. "
                 "The estimate is the noisy count; the projected (consistent) counts are in "
                 "the values file.",
    "mwem": "No single-ε comparison: this release gives every person the same ε already.",
    "ldp_mean": "No single-ε comparison: the noise was added on the devices, each with its "
                "own ε, before this release combined the reports.",
}

KIND_WORDS = {
    "mean": "average, each row with its own ε",
    "histogram": "category shares, each row with its own ε",
    "user_mean": "average protecting each user with all their rows (Cummings et al., "
                 "*Mean Estimation with User-level Privacy under Data Heterogeneity*)",
    "heavy_hitters": "frequent records, each attribute protected separately (Ghazi et al., "
                     "*Algorithms with More Granular Differential Privacy Guarantees*)",
    "attribute_histograms": "one count per attribute value, each attribute protected "
                            "separately (the same paper)",
    "marginals": "marginals by the projection mechanism, each attribute protected separately "
                 "(the same paper, §4.1)",
    "mwem": "marginals answered by partial-DP MWEM, each attribute protected separately "
            "(the same paper, §4.2)",
    "ldp_mean": "combination of reports randomized on the devices (Aliakbarpour et al., "
                "*High-Probability Bounds For Heterogeneous Local Differential Privacy*)",
}
POLICY = {
    "cap": "a person's ε is lowered to what they have left",
    "exclude": "a person is left out",
    "fail": "the release is refused",
}
CHARGE = {
    "effective": "each person is charged the privacy loss the release actually gave them "
                 "(at most the ε they allowed)",
    "demand": "each person is charged the full ε they allowed",
}

_GLOSSARY: list[tuple[str, str, tuple[str, ...]]] = [
    # (term, explanation, the words that show the report uses the term)
    ("ε (epsilon), privacy level",
     "how much one person's data may change what is published. Smaller is more private: "
     "with ε = 0.1 the published numbers look almost the same whether or not the person is "
     "in the data; with ε = 4 a careful observer may learn something about them. Every "
     "person here chose their own ε.",
     ('ε',)),
    ("interval (95%)",
     "for means and category shares: the range that contains the table's own value (the "
     "plain average, or share, of the rows of the group), with probability at least 95%, "
     "whatever the data are. It covers the privacy noise and the weighting of people by "
     "their ε together. It does not cover sampling error (how the people in the table "
     "differ from a wider population).",
     ('interval',)),
    ("± and ± as share of the value",
     "half the width of the interval, in the value's own units, and that half-width "
     "divided by the published value.",
     ('±',)),
    ("privacy for free",
     "a person who allowed a large ε is charged less than they allowed when using more of "
     "their ε would not make the result more accurate. They get stronger privacy at no "
     "cost in accuracy, and keep the rest of their budget for later releases.",
     ('privacy for free',)),
    ("why rows with a tiny ε barely move the estimate",
     "a person who asks for very strong privacy (a tiny ε) gets a small weight in the "
     "average, so that changing their value changes the result by less than the noise "
     "hides; people with larger ε carry more weight.",
     ('weighted', 'weight')),
    ("public rows (ε = ∞ in the data)",
     "rows whose ε in the data is ∞: the person asks for no protection. No release charges "
     "more than the budget a person has left, so their ε is capped to it like anyone's; "
     "they are counted apart from the people whose ε was lowered.",
     ('public row',)),
    ("interval (noise + ε-weighting), of which: weighting rows by ε",
     "estimators that weight people by their ε may shift a value by at most a known amount "
     "on any data (the published bias_bound, computed from the ε column only); the interval "
     "includes it, and the 'of which' column shows how much of the ± it is.",
     ('of which', 'ε-weighting', 'weighting rows by')),
    ("one ε for all (single-ε library)",
     "what a library that gives everyone the same ε publishes: to respect every demand it "
     "must use the smallest ε of the group for every row, which widens the interval.",
     ('one ε for all', 'single-ε')),
    ("charge, budget, budget left",
     "each person has a total budget of ε across all releases on this ledger; every "
     "release charges each person the privacy it used, and charges add up over releases. "
     "A person whose budget is spent is not used again.",
     ('charged', 'budget')),
    ("all charges added up",
     "the sum of everybody's charge in one release; a bookkeeping total, not the privacy "
     "loss of any one person (that is at most their own charge).",
     ('all charges added up',)),
    ("fallback",
     "when a group has too little data for the privacy asked, the release publishes the "
     "middle of the allowed range instead of an estimate (it says nothing about the data).",
     ('fallback',)),
    ("threshold τ",
     "the level above which extra ε does not help the average: people above it are "
     "charged τ only (privacy for free).",
     ('τ',)),
    ("partition selection, δ (delta)",
     "when the groups themselves are private, a group is published only if its noisy total "
     "weight (the sum of its members' min(ε, c)) reaches a threshold, so that a group "
     "holding a single person appears with probability at most δ (say one in ten million). "
     "Each person is then protected with (κ, δ): privacy loss at most κ = min(ε, c), except "
     "with probability δ.",
     ('partition selection',)),
    ("user-level protection",
     "the whole history of a user (all their rows) is protected with their ε, not each row "
     "separately.",
     ('each user with all their rows', 'user-level')),
    ("per-attribute protection",
     "each column of a person's record (say, their region) is protected with ε₀; their "
     "whole record with the larger per-person ε shown beside it.",
     ('protected separately', 'per attribute')),
    ("device-randomized reports (local privacy)",
     "each person's device added noise before sending the value, so the server never sees "
     "it; combining the reports costs nothing more.",
     ('randomized on the devices',)),
]


def glossary(used_in: str | None = None) -> list[str]:
    """The glossary section (Markdown lines): the terms that ``used_in`` (the report's
    text) uses, each found by its own words (case-insensitive); every term without it."""
    text = None if used_in is None else used_in.lower()
    lines = [GLOSSARY_HEADING, ""]
    lines += [f"- **{term}**: {words}" for term, words, triggers in _GLOSSARY
              if text is None or any(t.lower() in text for t in triggers)]
    lines.append("")
    return lines



ALLOCATION = {
    "sequential": "sequential: each release may use all the budget a person has left",
    "equal": "equal: each release may use an equal share of the budget a person had left "
             "when the run started",
    "optimal": "optimal: each release may use the share of the budget a person had left "
               "when the run started that minimizes the weighted predicted error",
}

