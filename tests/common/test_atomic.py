"""tbconsole.common.atomic.replace_dir: a folder is replaced whole, or not at all."""

import threading

import pytest

from tbconsole.common.atomic import replace_dir


def _hidden(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_a_new_folder_appears_whole_and_nothing_is_left_beside_it(tmp_path):
    target = tmp_path / "deep" / "export"
    with replace_dir(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".export.tmp-") and tmp.is_dir()
        (tmp / "a.txt").write_text("new")
        assert not target.exists()  # not there until the block ends
    assert (target / "a.txt").read_text() == "new"
    assert _hidden(target.parent) == []


def test_an_old_folder_is_replaced_and_removed(tmp_path):
    target = tmp_path / "export"
    target.mkdir()
    (target / "old.txt").write_text("old")
    (target / "sub").mkdir()
    with replace_dir(target) as tmp:
        (tmp / "a.txt").write_text("new")
        assert (target / "old.txt").read_text() == "old"  # readers still see the old one
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert _hidden(tmp_path) == []


def test_an_error_leaves_the_old_folder_and_no_temporary(tmp_path):
    target = tmp_path / "export"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), replace_dir(target) as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("the build failed")
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert _hidden(tmp_path) == []


def test_a_failed_swap_puts_the_old_folder_back(tmp_path):
    target = tmp_path / "export"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(OSError), replace_dir(target) as tmp:
        (tmp / "a.txt").write_text("new")
        (tmp / "a.txt").rename(tmp.parent / "stolen")  # the new folder's files are gone ...
        tmp.rmdir()  # ... and so is the folder: its rename into place fails
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert _hidden(tmp_path) == []


def test_two_builders_of_one_folder_never_share_a_temporary(tmp_path):
    target = tmp_path / "export"
    seen, errors = [], []
    barrier = threading.Barrier(2)

    def build(text):
        try:
            with replace_dir(target) as tmp:
                seen.append(tmp)
                (tmp / "a.txt").write_text(text)
                barrier.wait(5)  # both are building at once
        except OSError as exc:  # the second swap may meet the first's folder mid-way: not silent
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(set(seen)) == 2
    assert (target / "a.txt").read_text() in {"one", "two"}
    assert _hidden(tmp_path) == []
