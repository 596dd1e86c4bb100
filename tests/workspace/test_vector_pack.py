"""Vector packs: round trip, memory mapping, refusing damaged or inconsistent files."""

from __future__ import annotations

import numpy as np
import pytest

from kairox.workspace.reordered_rows import ReorderedRows
from kairox.workspace.vector_pack import (
    FORMATS,
    PackWriter,
    VectorPack,
    adopt_pack,
    decode,
    encode,
    hand_over_vectors,
    pack_key,
    read_pack,
    remove_packs,
    write_pack,
)

DIM = 4


@pytest.fixture
def pack() -> VectorPack:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(5, DIM)).astype(np.float32)
    return VectorPack(
        ids=np.array([3, 7, 9]),
        chunk_rows=np.array([0, 1, 4]),
        owners=np.array([0, 0, 1, 2]),
        sentence_rows=np.array([2, 3, 1, 4]),
        vectors=vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
    )


def same(a: VectorPack, b: VectorPack) -> bool:
    return all(
        np.array_equal(getattr(a, name), getattr(b, name))
        for name in ("ids", "chunk_rows", "owners", "sentence_rows", "vectors")
    )


def test_a_pack_reads_back_as_written_with_its_vectors_mapped(tmp_path, pack) -> None:
    key = pack_key("/work/project", "hashing-384", DIM)
    token = write_pack(tmp_path, key, pack)
    loaded = read_pack(tmp_path, key, token, DIM)
    assert loaded is not None and same(loaded, pack)
    assert isinstance(loaded.vectors, np.memmap)  # not read into memory up front
    assert not list(tmp_path.glob("*.tmp"))


def test_keys_differ_by_workspace_embedder_and_width() -> None:
    keys = {
        pack_key("/a", "hashing-384", 384),
        pack_key("/b", "hashing-384", 384),
        pack_key("/a", "minilm", 384),
        pack_key("/a", "hashing-384", 256),
    }
    assert len(keys) == 4


def test_missing_or_damaged_files_read_as_no_pack(tmp_path, pack) -> None:
    key = pack_key("/w", "e", DIM)
    assert read_pack(tmp_path, key, "nope", DIM) is None
    token = write_pack(tmp_path, key, pack)
    assert read_pack(tmp_path, key, token, DIM + 1) is None  # another width
    vectors_file = next(tmp_path.glob(f"{key}-{token}.vectors.npy"))
    vectors_file.write_bytes(vectors_file.read_bytes()[:40])  # cut short
    assert read_pack(tmp_path, key, token, DIM) is None
    token = write_pack(tmp_path, key, pack)
    next(tmp_path.glob(f"{key}-{token}.index.npz")).write_bytes(b"not a zip file")
    assert read_pack(tmp_path, key, token, DIM) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("chunk_rows", np.array([0, 1, 5])),  # past the last vector
        ("sentence_rows", np.array([2, 3, 1, -1])),
        ("owners", np.array([0, 0, 1, 3])),  # past the last chunk
        ("chunk_rows", np.array([0, 1])),  # not one per chunk
    ],
)
def test_inconsistent_arrays_read_as_no_pack(tmp_path, pack, field, value) -> None:
    broken = VectorPack(**{**pack.__dict__, field: value})
    key = pack_key("/w", "e", DIM)
    assert read_pack(tmp_path, key, write_pack(tmp_path, key, broken), DIM) is None


def test_a_failed_write_leaves_nothing_behind(tmp_path, pack) -> None:
    class Unwritable:
        def __array__(self, *args, **kwargs):
            raise OSError("disk full")

    broken = VectorPack(**{**pack.__dict__, "owners": Unwritable()})
    folder = tmp_path / "packs"
    with pytest.raises(OSError, match="disk full"):
        write_pack(folder, "k", broken)
    assert list(folder.iterdir()) == []


def test_removing_keeps_one_token_and_other_keys(tmp_path, pack) -> None:
    old = write_pack(tmp_path, "k", pack)
    new = write_pack(tmp_path, "k", pack)
    other = write_pack(tmp_path, "j", pack)
    remove_packs(tmp_path, "k", keep=new)
    assert read_pack(tmp_path, "k", old, DIM) is None
    assert read_pack(tmp_path, "k", new, DIM) is not None
    assert read_pack(tmp_path, "j", other, DIM) is not None
    remove_packs(tmp_path / "missing", "k")  # no folder: nothing to do


def test_vectors_added_in_blocks_read_back_as_one_matrix(tmp_path, pack) -> None:
    with PackWriter(tmp_path, "k", rows=5, dim=DIM) as writer:
        for start in range(0, 5, 2):
            writer.add(pack.vectors[start : start + 2])
        token = writer.finish(pack)
    loaded = read_pack(tmp_path, "k", token, DIM)
    assert loaded is not None and same(loaded, pack)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("added", [4, 6])
def test_a_pack_with_the_wrong_number_of_vectors_is_refused(tmp_path, pack, added) -> None:
    folder = tmp_path / "packs"
    vectors = np.vstack([pack.vectors, pack.vectors])[:added]
    with pytest.raises(ValueError, match="5"), PackWriter(folder, "k", rows=5, dim=DIM) as w:
        w.add(vectors)
        w.finish(pack)
    assert list(folder.iterdir()) == []


def test_a_writer_left_unfinished_removes_what_it_wrote(tmp_path, pack) -> None:
    folder = tmp_path / "packs"
    with PackWriter(folder, "k", rows=5, dim=DIM) as writer:
        writer.add(pack.vectors[:3])
        assert list(folder.glob("*.tmp"))
    assert list(folder.iterdir()) == []
    with pytest.raises(ValueError, match="shape"), PackWriter(folder, "k", rows=5, dim=DIM) as w:
        w.add(pack.vectors[:, :2])
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(("form", "error"), [("float16", 1e-3), ("int8", 1e-2)])
def test_a_compact_pack_stores_each_row_close_to_its_float32_vector(
    tmp_path, pack, form, error
) -> None:
    hashes = np.array([bytes([n]) * 31 + b"\0" for n in range(5)], dtype="S32")
    with PackWriter(tmp_path, "k", rows=5, dim=DIM, form=form, with_hashes=True) as writer:
        writer.add(pack.vectors[:2], hashes[:2])
        writer.add(pack.vectors[2:], hashes[2:])
        token = writer.finish(pack)
    read = read_pack(tmp_path, "k", token, DIM, with_hashes=True)
    assert read is not None and read.vectors.dtype == np.dtype(FORMATS[form])
    assert (read.scales is not None) == (form == "int8")
    # The digests come back whole, a trailing zero byte included.
    assert read.hashes is not None and read.hashes.view(np.uint8).reshape(-1, 32)[0, 31] == 0
    assert np.array_equal(read.hashes, hashes)
    assert np.abs(read.rows() - pack.vectors).max() < error
    assert np.array_equal(read.rows(read.chunk_rows), read.rows()[read.chunk_rows])
    assert read_pack(tmp_path, "k", token, DIM) is not None  # hashes read only when asked


def test_encoding_round_trips_and_zero_rows_stay_zero() -> None:
    rows = np.array([[0.6, -0.8, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    for form in FORMATS:
        codes, scales = encode(rows, form)
        assert np.allclose(decode(codes, scales), rows, atol=0.005)
        assert not decode(codes, scales)[1].any()
    codes, scales = encode(rows, "int8")
    assert codes.dtype == np.int8 and codes[0].tolist() == [95, -127, 0]


def test_a_writer_refuses_rows_without_their_hashes_or_an_unknown_format(tmp_path, pack) -> None:
    with pytest.raises(ValueError, match="unknown vector format"):
        PackWriter(tmp_path, "k", rows=5, dim=DIM, form="bfloat16")
    writer = PackWriter(tmp_path, "k", rows=5, dim=DIM, with_hashes=True)
    with writer, pytest.raises(ValueError, match="hashes"):
        writer.add(pack.vectors)
    assert not list(tmp_path.glob("k-*"))


def test_index_arrays_take_four_bytes_a_value_when_they_fit(tmp_path, pack) -> None:
    key = pack_key("/work/project", "hashing-384", DIM)
    large = VectorPack(**{**pack.__dict__, "ids": np.array([3, 7, 2**40])})
    for written, stored in ((pack, np.int32), (large, np.int64)):
        token = write_pack(tmp_path, key, written)
        with np.load(tmp_path / f"{key}-{token}.index.npz") as arrays:
            assert {arrays[name].dtype for name in arrays.files} >= {np.dtype(stored)}
            assert arrays["sentence_rows"].dtype == np.int32
        loaded = read_pack(tmp_path, key, token, DIM)
        assert loaded is not None and same(loaded, written) and loaded.ids.dtype == np.int64


def test_the_hashes_written_are_read_back_before_the_pack_is_finished(tmp_path) -> None:
    hashes = np.array([bytes([n]) * 32 for n in range(3)], dtype="S32")
    with PackWriter(tmp_path, "k", rows=3, dim=DIM, with_hashes=True) as writer:
        writer.add(np.eye(3, DIM, dtype=np.float32), hashes)
        assert np.array_equal(writer.written_hashes(), hashes)


def test_a_pack_under_another_key_is_adopted_by_its_token(tmp_path, pack) -> None:
    old, new = pack_key("/was/here", "e", DIM), pack_key("", "e", DIM)
    token = write_pack(tmp_path, old, pack)
    (tmp_path / f"{old}-{token}.ann-keys.npy").write_bytes(b"beside it")
    other = write_pack(tmp_path, old, pack)  # another pack: not this token's
    assert adopt_pack(tmp_path, new, token)
    adopted = read_pack(tmp_path, new, token, DIM)
    assert adopted is not None and same(adopted, pack)
    assert (tmp_path / f"{new}-{token}.ann-keys.npy").read_bytes() == b"beside it"
    assert not list(tmp_path.glob(f"{old}-{token}.*"))
    assert read_pack(tmp_path, old, other, DIM) is not None  # left as it was
    assert not adopt_pack(tmp_path, new, token)  # already named so: nothing to do
    # A run cut short between two renames: the next finds the rest.
    (tmp_path / f"{new}-{token}.index.npz").rename(tmp_path / f"{old}-{token}.index.npz")
    assert read_pack(tmp_path, new, token, DIM) is None
    assert adopt_pack(tmp_path, new, token) and read_pack(tmp_path, new, token, DIM) is not None
    assert not adopt_pack(tmp_path / "missing", new, token)


def _int8_pack(tmp_path, pack) -> tuple[str, np.ndarray]:
    """An int8 pack of ``pack``'s arrays, and its codes."""
    with PackWriter(tmp_path, "k", rows=5, dim=DIM, form="int8") as writer:
        writer.add(pack.vectors)
        token = writer.finish(pack)
    return token, np.load(tmp_path / f"k-{token}.vectors.npy")


def _partition_codes(tmp_path, token: str, codes: np.ndarray, order: np.ndarray) -> None:
    """The files a partition keeps an int8 pack's codes in: in ``order``, with it."""
    np.save(tmp_path / f"k-{token}.ivf-order.npy", order)
    np.save(tmp_path / f"k-{token}.ivf-codes.npy", codes[order])


def test_an_int8_pack_handed_over_reads_its_rows_through_the_partitions_order(
    tmp_path, pack
) -> None:
    token, codes = _int8_pack(tmp_path, pack)
    before = read_pack(tmp_path, "k", token, DIM)
    _partition_codes(tmp_path, token, codes, np.array([3, 0, 4, 1, 2]))
    assert hand_over_vectors(tmp_path, "k", token)
    assert not (tmp_path / f"k-{token}.vectors.npy").exists()  # the codes once on disk
    after = read_pack(tmp_path, "k", token, DIM)
    assert isinstance(after.vectors, ReorderedRows) and len(after.vectors) == 5
    for which in (slice(None), slice(1, 4), np.array([4, 0, 2, 2]), after.chunk_rows):
        np.testing.assert_array_equal(after.vectors[which], codes[which])
        np.testing.assert_array_equal(after.rows(which), before.rows(which))
    np.testing.assert_array_equal(after.vectors[3], codes[3])


def test_codes_that_differ_from_the_packs_are_not_handed_over(tmp_path, pack) -> None:
    token, codes = _int8_pack(tmp_path, pack)
    changed = codes.copy()
    changed[2] = -changed[2]
    _partition_codes(tmp_path, token, changed, np.arange(5))
    assert not hand_over_vectors(tmp_path, "k", token)
    (tmp_path / f"k-{token}.ivf-codes.npy").unlink()  # a partition cut short
    assert not hand_over_vectors(tmp_path, "k", token)
    # Either way the pack keeps and reads its own file.
    read = read_pack(tmp_path, "k", token, DIM)
    assert read is not None and isinstance(read.vectors, np.memmap)
    np.testing.assert_array_equal(read.vectors, codes)


def test_a_pack_read_without_its_layout_has_its_ids_alone(tmp_path, pack) -> None:
    token = write_pack(tmp_path, "k", pack)
    read = read_pack(tmp_path, "k", token, DIM, layout=False)
    assert read is not None and read.ids.tolist() == [3, 7, 9]
    assert not len(read.chunk_rows) and not len(read.sentence_rows) and not len(read.owners)
