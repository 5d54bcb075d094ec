"""The shipped examples (probekit.examples, `probekit examples`), read from the source tree.

The wheel itself is built and run in tests/test_wheel.py (slow); here: what the wheel is built
from, the listing, the dependency walk and the copy, all on the clone's files.
"""

import fnmatch
import tomllib
from pathlib import Path

import pytest

from probekit.cli import main
from probekit.errors import ConfigError
from probekit.examples import (
    copy_examples,
    example_files,
    example_path,
    examples_root,
    find_example,
    list_examples,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_FILES = sorted([*REPO.glob("probes/*.toml"), *REPO.glob("circuits/*.toml")])


def test_root_is_the_clone_and_lists_every_toml_with_its_description():
    assert Path(str(examples_root())) == REPO
    examples = list_examples()
    assert sorted(REPO / e.relpath for e in examples) == EXAMPLE_FILES
    assert len(examples) == len(EXAMPLE_FILES) == 36
    for e in examples:
        raw = tomllib.loads((REPO / e.relpath).read_text())
        assert e.description == " ".join(raw["suite"]["description"].split())


def test_cli_list_prints_one_line_per_example(capsys):
    assert main(["examples", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1] for line in lines[:36]}
    assert len(rows) == 36
    assert rows["modadd_grokked"] == "report"
    assert rows["kg_bridge"] == "test"
    assert rows["diagnose_he_depth"] == "diagnose"
    assert lines[-1].startswith("36 examples")


def test_files_named_by_an_example_are_found_with_globs_and_parent_paths():
    assert example_files(find_example("modadd_grokked")) == [
        "probes/checkpoints/modadd-p53/config.json",
        "probes/checkpoints/modadd-p53/model.safetensors",
        "probes/modadd_grokked.toml",
    ]
    similarity = example_files(find_example("probes/modadd_similarity.toml"))
    steps = sorted(p.name for p in (REPO / "probes/checkpoints/modadd-p53-series").iterdir())
    assert len(steps) == 5
    assert len(similarity) == 1 + 2 + 2 * len(steps)  # the file, compare_checkpoint, the series
    assert example_files(find_example("diagnose_he_depth")) == [
        "docs/diagnosis/he_depth/markers.csv", "probes/diagnose_he_depth.toml",
    ]
    assert example_files(find_example("kg_bridge")) == [
        "circuits/kg_bridge.toml",
        "probes/checkpoints/kg-composition/config.json",
        "probes/checkpoints/kg-composition/model.safetensors",
    ]
    assert example_files(find_example("smollm2_recall")) == [
        "circuits/data/capital_pairs.jsonl", "circuits/smollm2_recall.toml",
    ]


def test_the_wheel_package_data_covers_every_file_an_example_needs():
    """Each needed file matches a package-data glob of the package its folder maps to."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder_of = {pkg: folder for pkg, folder in tool["package-dir"].items()}
    needed = sorted({p for e in list_examples() for p in example_files(e)})
    assert len(needed) == 63  # + diagnose_scan_noise_power; + the two bio_scratch files; + probes/data/biographies_eval.jsonl, diagnose_bio_smoke's [outcome]
    for rel in needed:
        owners = [pkg for pkg, folder in folder_of.items() if rel.startswith(folder + "/")]
        assert len(owners) == 1, rel
        inner = rel.removeprefix(folder_of[owners[0]] + "/")
        globs = tool["package-data"][owners[0]]
        # setuptools' "**/" also matches no folder at all: try the glob with it removed too
        assert any(fnmatch.fnmatch(inner, g) or fnmatch.fnmatch(inner, g.replace("**/", ""))
                   for g in globs), rel


def test_unknown_name_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"'modadd_grok'.*did you mean modadd_grokked"):
        find_example("modadd_grok")


def test_copy_runs_where_it_lands_and_never_overwrites(tmp_path, capsys):
    from probekit.suites.spec import load_suite

    dest = tmp_path / "mine"
    assert main(["examples", "copy", "modadd_similarity", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "wrote 13 files" in out
    assert "probekit report probes/modadd_similarity.toml" in out
    suite = load_suite(dest / "probes/modadd_similarity.toml")
    assert suite.resolve(suite.model.checkpoint).resolve().is_relative_to(dest.resolve())
    # identical files are kept; a second example sharing them is copied beside them
    result = copy_examples(["modadd_grokked"], dest)
    assert [p.name for p in result.written] == ["modadd_grokked.toml"]
    assert len(result.unchanged) == 2
    # a file of the user's in the way: nothing is written, and the file is named
    edited = dest / "probes/modadd_similarity.toml"
    edited.write_text(edited.read_text() + "# mine\n")
    with pytest.raises(ConfigError, match=r"1 file\(s\).*modadd_similarity\.toml.*nothing was copied"):
        copy_examples(["all"], dest)
    assert edited.read_text().endswith("# mine\n")
    assert not (dest / "circuits").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        copy_examples(["modadd_grokked"], tmp_path / "file")


def test_example_path_in_the_clone_is_the_file_itself():
    with example_path("modadd_grokked") as path:
        assert path == REPO / "probes/modadd_grokked.toml"


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): files by bytes, links by target."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            out[rel] = path.read_bytes().hex()
        else:
            out[rel] = "dir"
    return out


@pytest.mark.parametrize("where", ["dest", "folder", "file"])
@pytest.mark.parametrize("dangling", [True, False])
def test_copy_refuses_a_symlink_at_or_inside_dest(tmp_path, where, dangling):
    """lstat on every component: a link, dangling or not, stops the copy before any write."""
    outside = tmp_path / "outside"
    if not dangling:
        outside.mkdir()
    dest = tmp_path / "mine"
    link = {"dest": dest, "folder": dest / "probes",
            "file": dest / "probes" / "modadd_grokked.toml"}[where]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "x" if where == "file" else outside)
    before = _tree(tmp_path)
    with pytest.raises(ConfigError, match=rf"{link.name}.* is a symbolic link .*nothing was copied"):
        copy_examples(["modadd_grokked"], dest)
    assert _tree(tmp_path) == before


def test_cli_copy_refuses_a_dangling_link_and_an_empty_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").symlink_to(tmp_path / "elsewhere")
    for bad, message in [("mine", "is a symbolic link"), ("", "examples copy DIR is empty"),
                         ("  ", "examples copy DIR is empty")]:
        assert main(["examples", "copy", "modadd_grokked", bad]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and message in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("existing", [False, True])
def test_permission_error_mid_copy_leaves_nothing_written(tmp_path, capsys, monkeypatch, existing):
    """The third file fails: the two written before and every folder created are removed."""
    import shutil

    dest = tmp_path / "mine"
    if existing:  # the user's folder with a file of their own: kept as it was
        (dest / "probes").mkdir(parents=True)
        (dest / "probes" / "notes.txt").write_text("mine")
    before = _tree(tmp_path)
    calls = []
    real = shutil.copyfileobj

    def failing(src, dst, *args):
        calls.append(dst.name)
        if len(calls) == 3:
            raise PermissionError(13, "Permission denied", dst.name)
        return real(src, dst, *args)

    monkeypatch.setattr("probekit.examples.shutil.copyfileobj", failing)
    assert main(["examples", "copy", "modadd_similarity", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "Permission denied" in err and "(the 2 file(s) written before were removed)" in err
    assert len(calls) == 3
    assert _tree(tmp_path) == before
