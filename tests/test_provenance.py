"""A long-term merge never drops a fact silently: lost names come back, dropped facts are counted where they live."""

from memory.provenance import account, dropped

EXISTING = ("Caroline adopted a cat named Miso. [v3]\n"
            "Melanie moved to Kyoto in 2021. [v4]\n"
            "Kept from long-term v18: Zed, 42 (+3 more)\n"
            "Older details are in v1, v2: 5 fact(s) not repeated here.")
NEW = "Caroline started pottery on 12 May.\nKai bought a red bicycle for 300 dollars."
MERGED = "Caroline adopted a cat named Miso. [v3]\nCaroline started pottery on 12 May. [v5]"


def test_what_the_merge_dropped_is_put_back_or_counted_under_the_version_that_holds_it():
    out = account(MERGED, [("long-term v19", EXISTING), ("v5", NEW)])
    lines = out.splitlines()
    assert lines[:2] == MERGED.splitlines()  # the merge itself is untouched
    assert "Kept from long-term v19: Kyoto, 2021, Zed, 42 (+3 more)" in lines
    assert "Kept from v5: 300" in lines
    # Melanie's move (tagged v4) and Kai's bicycle (from v5) are gone: said where, with the earlier 5 still counted.
    assert lines[-1] == "Older details are in v1, v2, v4, v5: 7 fact(s) not repeated here."


def test_accounting_is_stable_when_merged_again_and_when_the_model_copies_the_notes():
    once = account(MERGED, [("long-term v19", EXISTING), ("v5", NEW)])
    again = account(once, [("long-term v20", once)])  # a model that copies its input, bookkeeping included
    assert again.count("Older details") == 1 and again.endswith("v1, v2, v4, v5: 7 fact(s) not repeated here.")
    assert "Kept from long-term v20: Kyoto, 2021, Zed, 42, 300 (+3 more)" in again
    assert again.count("Kept from") == 1


def test_a_merge_that_keeps_everything_adds_nothing():
    merged = EXISTING.split("\nKept")[0] + "\n" + NEW
    assert dropped(merged, NEW) == []
    assert account(merged, [("v5", NEW)]) == merged


def test_a_reworded_fact_is_carried_and_a_missing_one_is_not():
    source = "Mahe's birthday is on 14 March.\nMahe prefers green tea over coffee."
    merged = "Mahe (birthday 14 March) likes green tea more than coffee."
    assert dropped(merged, source) == []
    assert dropped("Mahe's birthday: 14 March.", source) == ["Mahe prefers green tea over coffee."]
