"""TantivyIndex and TantivySource behaviour: updates, deletes, fingerprints, visibility across
objects and processes, the writer lock, errors and stemming."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import kairox_tantivy
import pytest
from kairox_tantivy import TantivyIndex, TantivyIndexError, TantivyLockedError

from kairox.retrieval import Document, IngestableSource, Query
from kairox.support.errors import KairoxError
from kairox.testing import CORPUS, run
from kairox.testing.unprivileged import require_permissions, run_unprivileged


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


def search_ids(index: TantivyIndex, text: str, k: int = 10, **filters) -> list[str]:
    return ids(index.search(text, k, filters))


# -- updates, deletes, fingerprints ----------------------------------------------------


def test_upsert_replaces_by_id_without_duplicates(filled, tmp_path, make_source):
    source = make_source(tmp_path)
    filled.upsert([Document("astro-1", "Jupiter has a great red spot.", title="Jupiter")])
    filled.upsert([Document("astro-1", "Jupiter has a great red spot.", title="Jupiter")])
    assert filled.count() == len(CORPUS)
    assert ids(run(source.retrieve(Query("saturn rings")))) == []
    assert ids(run(source.retrieve(Query("jupiter")))) == ["astro-1"]


def test_the_last_copy_of_an_id_in_one_batch_wins(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    assert index.upsert([Document("a", "first draft"), Document("a", "final version")]) == 1
    assert index.count() == 1
    assert search_ids(index, "draft") == []
    assert search_ids(index, "final") == ["a"]


def test_delete_by_id(filled, tmp_path, make_source):
    source = make_source(tmp_path)
    assert filled.delete(["astro-1", "no-such-id", "astro-1"]) == 1
    assert filled.count() == len(CORPUS) - 1
    assert ids(run(source.retrieve(Query("saturn rings")))) == []
    assert filled.delete(["astro-1"]) == 0
    assert filled.delete([]) == 0


def test_fingerprints_round_trip(filled, corpus_docs):
    assert filled.fingerprints() == {doc.id: doc.fingerprint for doc in corpus_docs}
    changed = Document("bio-1", "Photosynthesis, revised.", title="Photosynthesis")
    filled.upsert([changed])
    filled.delete(["bio-2"])
    expected = {doc.id: doc.fingerprint for doc in corpus_docs if doc.id != "bio-2"}
    expected["bio-1"] = changed.fingerprint
    assert filled.fingerprints() == expected


def test_source_is_ingestable_and_creates_its_index_on_first_write(tmp_path, make_source):
    source = make_source(tmp_path, "new/index")
    assert isinstance(source, IngestableSource)
    assert source.fingerprints() == {}
    source.delete(["nothing"])
    assert not (tmp_path / "new").exists(), "reading must not create the index"
    doc = Document("a", "alpha text", title="A", uri="file:///a.txt", metadata={"lang": "en"})
    source.upsert([doc])
    assert source.fingerprints() == {"a": doc.fingerprint}
    [hit] = run(source.retrieve(Query("alpha")))
    assert hit.id == "a" and hit.source == "papers"
    assert hit.text == "A\nalpha text"
    assert hit.uri == "file:///a.txt"
    assert hit.metadata == {"lang": "en", "title": "A"}
    changed = Document("a", "alpha text, revised", title="A")
    source.upsert([changed])
    assert source.fingerprints() == {"a": changed.fingerprint}
    source.delete(["a"])
    assert source.fingerprints() == {}


def test_a_hit_without_title_is_just_the_body(tmp_path, make_source):
    source = make_source(tmp_path)
    source.upsert([Document("n", "untitled note about otters")])
    [hit] = run(source.retrieve(Query("otters")))
    assert hit.text == "untitled note about otters"
    assert hit.metadata == {}
    assert hit.uri is None


def test_ids_must_fit_in_one_tantivy_term(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    with pytest.raises(ValueError, match="at most"):
        index.upsert([Document("i" * 70_000, "too long an id")])
    with pytest.raises(ValueError, match="UTF-8"):
        index.upsert([Document("bad\ud800id", "lone surrogate")])
    assert index.count() == 0


# -- visibility across objects and processes --------------------------------------------


def test_writes_are_visible_as_soon_as_upsert_returns(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    for n in range(3):
        index.upsert([Document(f"d{n}", f"walrus number {n}")])
        assert len(search_ids(index, "walrus")) == n + 1
    assert index.count() == 3


def test_another_object_sees_writes_on_its_next_query(tmp_path, make_source):
    writer = TantivyIndex(tmp_path / "index", create=True)
    writer.upsert([Document("a", "first penguin")])
    reader = TantivyIndex(tmp_path / "index")
    source = make_source(tmp_path)
    assert search_ids(reader, "penguin") == ["a"]
    assert ids(run(source.retrieve(Query("penguin")))) == ["a"]
    writer.upsert([Document("b", "second penguin")])
    writer.delete(["a"])
    assert search_ids(reader, "penguin") == ["b"]
    assert ids(run(source.retrieve(Query("penguin")))) == ["b"]
    assert reader.fingerprints().keys() == {"b"}


def test_back_to_back_commits_by_another_object_are_never_missed(tmp_path):
    writer = TantivyIndex(tmp_path / "index", create=True)
    reader = TantivyIndex(tmp_path / "index")
    for n in range(15):
        writer.upsert([Document(f"d{n}", f"heron {n}")])
        assert reader.count() == n + 1
        assert len(search_ids(reader, "heron", k=50)) == n + 1
    writer.delete([f"d{n}" for n in range(15)])
    assert search_ids(reader, "heron") == [] and reader.count() == 0


def test_another_process_sees_writes_on_its_next_query(tmp_path):
    reader = TantivyIndex(tmp_path / "index", create=True)
    assert search_ids(reader, "albatross") == []
    code = textwrap.dedent(
        f"""
        from kairox_tantivy import TantivyIndex
        from kairox.retrieval import Document
        TantivyIndex({str(tmp_path / "index")!r}).upsert([Document("x", "an albatross")])
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert search_ids(reader, "albatross") == ["x"]


# -- the writer lock ---------------------------------------------------------------------


def test_a_held_writer_lock_is_a_clear_error(filled):
    import tantivy

    other = tantivy.Index.open(str(filled.path))
    writer = other.writer()  # what another tool would do
    try:
        with pytest.raises(TantivyLockedError, match="being written by another process") as info:
            filled.upsert([Document("z", "zebra")])
        assert str(filled.path) in str(info.value)
        assert isinstance(info.value.__cause__, ValueError)
        with pytest.raises(TantivyLockedError):
            filled.delete(["astro-1"])
        # Reading never needs the lock.
        assert search_ids(filled, "saturn rings")[0] == "astro-1"
        assert filled.count() == len(CORPUS)
    finally:
        writer.wait_merging_threads()  # releases the lock
    filled.upsert([Document("z", "zebra")])
    assert search_ids(filled, "zebra") == ["z"]


def test_two_index_objects_do_not_share_the_writer(tmp_path):
    first = TantivyIndex(tmp_path / "index", create=True)
    second = TantivyIndex(tmp_path / "index")
    with first._writer(), pytest.raises(TantivyLockedError, match="tantivy writer lock held"):
        second.upsert([Document("a", "aardvark")])
    second.upsert([Document("a", "aardvark")])  # released once the first write ended
    assert search_ids(first, "aardvark") == ["a"]


def test_the_lock_is_held_only_during_a_write(filled):
    import tantivy

    filled.upsert([Document("q", "quokka")])
    # Idle: another writer can take the lock straight away.
    tantivy.Index.open(str(filled.path)).writer().wait_merging_threads()


def test_a_failed_write_releases_the_lock_and_changes_nothing(filled, monkeypatch):
    import kairox_tantivy.index as index_module
    import tantivy

    real_deleter = index_module._deleter

    def deleter_that_fails_on_the_second_document(writer):
        delete = real_deleter(writer)
        calls = []

        def flaky(field, value):
            calls.append(value)
            if len(calls) == 2:
                raise ValueError("disk on fire")
            delete(field, value)

        return flaky

    before = filled.fingerprints()
    monkeypatch.setattr(index_module, "_deleter", deleter_that_fails_on_the_second_document)
    with pytest.raises(ValueError, match="disk on fire"):
        filled.upsert([Document("astro-1", "half written"), Document("boom", "never indexed")])
    monkeypatch.undo()
    assert filled.fingerprints() == before  # the first document's add was rolled back
    assert search_ids(filled, "saturn rings")[0] == "astro-1"
    tantivy.Index.open(str(filled.path)).writer().wait_merging_threads()  # lock released
    filled.upsert([Document("boom", "indexed now")])
    assert search_ids(filled, "indexed") == ["boom"]


def test_concurrent_writes_through_one_object_take_turns(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            index.upsert([Document(f"t{n}", f"thread {n} writes a lemur")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.count() == 6


def test_a_writer_in_another_process_and_its_crash(filled):
    """Another process holding the writer gives the clear error; once it dies (even by
    SIGKILL, mid-batch) the OS releases the lock and the committed data is intact."""
    code = textwrap.dedent(
        f"""
        import sys, tantivy
        index = tantivy.Index.open({str(filled.path)!r})
        writer = index.writer()
        writer.delete_all_documents()  # uncommitted: must never become visible
        print("holding", flush=True)
        sys.stdin.read()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout.readline().strip() == "holding"
            with pytest.raises(TantivyLockedError, match="wait for it to finish or stop it"):
                filled.upsert([Document("y", "yak")])
            assert filled.count() == len(CORPUS)
        finally:
            holder.kill()
            holder.wait(timeout=60)
    filled.upsert([Document("y", "yak")])
    assert filled.count() == len(CORPUS) + 1
    assert search_ids(filled, "saturn rings")[0] == "astro-1"


# -- missing engine, missing or foreign index ----------------------------------------------


def test_missing_tantivy_gives_the_install_hint(filled, tmp_path, make_source, monkeypatch):
    monkeypatch.setitem(sys.modules, "tantivy", None)
    with pytest.raises(ImportError, match="pip install kairox-tantivy"):
        TantivyIndex(tmp_path / "other", create=True)
    with pytest.raises(ImportError, match=r"pip install tantivy\b"):
        kairox_tantivy.load_tantivy()
    source = make_source(tmp_path)  # building the source does not need tantivy yet
    with pytest.raises(ImportError, match="pip install kairox-tantivy"):
        run(source.retrieve(Query("saturn")))


def test_missing_index_says_how_to_fix(tmp_path, make_source):
    with pytest.raises(TantivyIndexError, match=r"kairox kb ingest papers PATH") as info:
        run(make_source(tmp_path, "nope").retrieve(Query("x")))
    assert "index_dir" in str(info.value) and str(tmp_path / "nope") in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TantivyIndexError, match="holds no tantivy index"):
        run(make_source(tmp_path, "empty").retrieve(Query("x")))
    with pytest.raises(TantivyIndexError, match="no tantivy index"):
        TantivyIndex(tmp_path / "empty")


def test_garbage_in_the_index_dir_is_a_clear_error(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "meta.json").write_text("this is not tantivy")
    with pytest.raises(TantivyIndexError, match="not a readable tantivy index"):
        TantivyIndex(tmp_path / "junk")


def test_a_foreign_tantivy_index_is_refused(tmp_path):
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("content", stored=True)
    tantivy.Index(builder.build(), path=str(tmp_path), reuse=False)
    with pytest.raises(TantivyIndexError, match="different schema"):
        TantivyIndex(tmp_path)
    with pytest.raises(TantivyIndexError, match="different schema"):
        TantivyIndex(tmp_path, create=True)


# -- queries -------------------------------------------------------------------------------


def test_stemming_matches_both_ways(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert(
        [
            Document("rings", "Saturn has rings"),
            Document("ran", "She was running and jumped"),
        ]
    )
    assert search_ids(index, "ring") == ["rings"]
    assert search_ids(index, "RINGS") == ["rings"]
    assert search_ids(index, "runs jumping") == ["ran"]


@pytest.mark.parametrize(
    "text",
    [
        "title:saturn",
        "body:(rings OR ice)",
        "saturn^10 rings~2",
        '"saturn rings"~3',
        "+saturn -rings",
        "saturn && rings || !ice",
        "[a TO z]",
        "id:astro-1",
        "*:*",
        "/sat.*/",
        "saturn\\",
        "\\\\\"\\'",
        "saturn\x00rings",
        "IN [saturn rings]",
        "\ud800 lone surrogate",
        "\u200b\u200d\ufeff",
        "ℌ𝔢𝔩𝔩𝔬 👩‍🚀 saturn",
    ],
)
def test_query_syntax_is_plain_text(filled, text):
    hits = filled.search(text, 5)
    assert isinstance(hits, list) and len(hits) <= 5


def test_termless_queries_return_nothing(filled):
    for text in ["", "   ", "\t\n", "-", "()", '"', "\x00", "x" * 2000, "*:*" * 100]:
        assert filled.search(text, 5) == [], repr(text)


def test_a_huge_query_still_answers(filled):
    text = " ".join(f"w{n}" for n in range(20_000)) + " saturn"
    assert isinstance(filled.search(text, 3), list)


def test_title_boost_changes_the_ranking(tmp_path, make_source):
    TantivyIndex(tmp_path / "index", create=True).upsert(
        [
            Document("in-title", "unrelated words here and more words", title="volcano"),
            Document("in-body", "a volcano volcano erupts near the volcano", title="news"),
        ]
    )
    body_first = run(make_source(tmp_path).retrieve(Query("volcano")))
    title_first = run(make_source(tmp_path, title_boost=20.0).retrieve(Query("volcano")))
    title_only = run(make_source(tmp_path, body_boost=0.0).retrieve(Query("volcano")))
    assert ids(body_first)[0] == "in-body"
    assert ids(title_first)[0] == "in-title"
    assert ids(title_only) == ["in-title"]


# -- failures a user meets on the command line ---------------------------------------------

KB_INGEST = "import sys; from kairox.cli import main; main(sys.argv[1:])"


@pytest.fixture
def tantivy_workspace(tmp_path):
    """A workspace whose ``papers`` knowledge base is a tantivy index at ``index``."""
    workspace = tmp_path / "ws"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "docs" / "a.md").write_text("Saturn has rings.\n")
    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.papers]\nkind = "tantivy"\nindex_dir = "index"\n'
    )
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "KAIROX_HOME": str(tmp_path / "state"),
    }
    return workspace, env


def test_index_errors_are_kairox_errors_the_cli_formats():
    assert issubclass(TantivyIndexError, KairoxError)
    assert issubclass(TantivyLockedError, KairoxError)


def test_an_index_dir_that_is_a_file_is_a_message_not_a_traceback(tantivy_workspace):
    workspace, env = tantivy_workspace
    (workspace / "index").write_text("not a folder")
    done = run_unprivileged(KB_INGEST, "kb", "ingest", "papers", "docs", cwd=workspace, env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot create the index folder" in done.stderr and "index" in done.stderr


def test_an_unreadable_index_folder_is_a_message_not_a_traceback(tantivy_workspace, tmp_path):
    require_permissions(tmp_path)
    workspace, env = tantivy_workspace
    TantivyIndex(workspace / "index", create=True).upsert([Document("a", "aardvark")])
    (workspace / "index").chmod(0)
    try:
        done = run_unprivileged(KB_INGEST, "kb", "ingest", "papers", "docs", cwd=workspace, env=env)
    finally:
        (workspace / "index").chmod(0o755)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot read the index folder" in done.stderr


def test_a_temporary_file_left_by_a_killed_writer_is_cleared(filled):
    leftover = filled.path / ".tmpAbC123"
    leftover.write_text('{"half": "written')
    reopened = TantivyIndex(filled.path)
    assert leftover.exists()  # opening to read never touches the folder
    reopened.upsert([Document("z", "zebra")])
    assert not leftover.exists()
    assert search_ids(reopened, "zebra") == ["z"]
