"""Project identity: same repository -> same key, same folder name -> never the same key."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.clients.project import identify, normalize_remote
from memory.model import normalize_scope


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:acme/app.git",
        "https://github.com/acme/app",
        "https://github.com/acme/app.git/",
        "https://user:s3cret-token@github.com/acme/app.git",
        "ssh://git@github.com:22/acme/app.git",
        "git+ssh://git@GitHub.com/Acme/App",
        "http://github.com//acme/app",
    ],
)
def test_remote_forms_of_one_repository_normalize_alike(url: str) -> None:
    assert normalize_remote(url) == "github.com/acme/app"


def test_credentials_never_survive_normalization() -> None:
    normalized = normalize_remote("https://oauth2:glpat-XYZ123@gitlab.example.com/g/sub/p.git")
    assert normalized == "gitlab.example.com/g/sub/p"


def test_local_remotes_keep_their_path() -> None:
    assert normalize_remote("/srv/git/app.git") == "/srv/git/app"
    assert normalize_remote("file:///srv/git/app") == "/srv/git/app"
    assert normalize_remote("") is None
    assert normalize_remote("not a url") is None


def test_two_clones_of_one_remote_share_a_key(make_project: Callable[..., Path]) -> None:
    one = identify(make_project("a/app", remote="git@github.com:acme/app.git"))
    two = identify(make_project("b/checkout", remote="https://github.com/acme/app"))
    assert one.key == two.key == "github.com_acme_app"
    assert one.name == two.name == "app"
    assert one.remote == "github.com/acme/app"
    assert normalize_scope(one.scope) == "project:github.com_acme_app"


def test_two_folders_named_app_without_remote_get_different_keys(
    make_project: Callable[..., Path],
) -> None:
    one = identify(make_project("client-a/app"))
    two = identify(make_project("client-b/app"))
    assert one.name == two.name == "app"
    assert one.key != two.key
    assert re.fullmatch(r"[0-9a-f]{16}", one.key)
    assert normalize_scope(one.scope) == one.scope


def test_a_subfolder_of_a_repository_is_the_same_project(
    make_project: Callable[..., Path],
) -> None:
    root = make_project("repo", remote="git@github.com:acme/repo.git")
    sub = root / "src" / "pkg"
    sub.mkdir(parents=True)
    assert identify(sub).key == identify(root).key
    assert identify(sub).root == str(root.resolve())


def test_a_repository_without_remote_is_keyed_by_its_real_path(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    root = make_project("plain")
    (root / ".git").mkdir()
    (root / "deep").mkdir()
    link = tmp_path / "link-to-plain"
    link.symlink_to(root)
    assert identify(root / "deep").key == identify(root).key == identify(link).key


def test_a_worktree_reads_the_remote_of_its_main_repository(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    main = make_project("main", remote="git@github.com:acme/tool.git")
    worktree_git = main / ".git" / "worktrees" / "wt"
    worktree_git.mkdir(parents=True)
    (worktree_git / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {worktree_git}\n")
    assert identify(tree).key == "github.com_acme_tool"


def test_long_remotes_stay_valid_scope_keys() -> None:
    from memory.clients.project import remote_key

    key = remote_key("example.com/" + "/".join(["very-long-group-name"] * 10))
    assert len(key) <= 100
    assert normalize_scope(f"project:{key}")


def test_a_missing_folder_still_has_an_identity(tmp_path: Path) -> None:
    identity = identify(tmp_path / "gone" / "app")
    assert identity.name == "app"
    assert len(identity.key) == 16
