"""seq2seq.data.shards: a split written flat reads back sentence by sentence, by positioned reads where
the system has them and by seek-and-read where it does not (Windows), the same ids either way."""

import gc
from pathlib import Path

import torch

import seq2seq.data.shards as shards
from seq2seq.data.shards import ShardReader, write_split

SRC = [[5, 6, 7], [8], [], [9, 10]]
TGT = [[11], [12, 13], [14, 15, 16], [17]]


def _rows(directory, indices):
    reader = ShardReader(directory, "train")
    return [reader.rows(side, indices) for side in ("src", "tgt")]


def test_rows_read_back_with_and_without_pread(tmp_path, monkeypatch):
    write_split(tmp_path, "train", SRC, TGT)
    indices = [3, 0, 2]
    with_pread = _rows(tmp_path, indices)
    (src_ids, src_lengths), (tgt_ids, tgt_lengths) = with_pread
    assert src_ids.tolist() == [9, 10, 5, 6, 7] and src_lengths.tolist() == [2, 3, 0]
    assert tgt_ids.tolist() == [17, 11, 14, 15, 16] and tgt_lengths.tolist() == [1, 1, 3]
    monkeypatch.setattr(shards, "_pread", None)
    for (ids, lengths), (ids_before, lengths_before) in zip(_rows(tmp_path, indices), with_pread, strict=True):
        assert torch.equal(ids, ids_before) and torch.equal(lengths, lengths_before)


def test_a_reader_keeps_its_files_open_between_reads_and_closes_them_when_it_goes(tmp_path, monkeypatch):
    """Open between reads: a run goes on reading a cache deleted under it. Closed with the reader: files left to
    the garbage collector raised ResourceWarnings in whatever test ran next."""
    write_split(tmp_path, "train", SRC, TGT)
    opened = []
    open_file = Path.open

    def tracking(path, *args, **kwargs):
        handle = open_file(path, *args, **kwargs)
        opened.append(handle)
        return handle

    monkeypatch.setattr(Path, "open", tracking)
    reader = ShardReader(tmp_path, "train")
    for path in tmp_path.iterdir():
        path.unlink()
    assert reader.rows("src", [0, 3])[0].tolist() == [5, 6, 7, 9, 10]
    assert opened and not any(handle.closed for handle in opened)
    del reader
    gc.collect()
    assert all(handle.closed for handle in opened)
