"""Cutting sources into length-sorted batches."""

from seq2seq.decode.batched import length_sorted_batches


def test_batches_run_longest_first_and_the_short_remainder_comes_last():
    lengths = [3, 9, 1, 7, 5, 9, 2]
    batches = list(length_sorted_batches(lengths, 3))
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert [[lengths[i] for i in batch] for batch in batches] == [[9, 9, 7], [5, 3, 2], [1]]
    assert batches[0] == [1, 5, 3]  # equal lengths keep their input order
