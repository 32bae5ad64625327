"""`WebFetch` reaches public hosts only (`agent/_web_address.py`): the app answers loopback
clients without a token, and a chat member's turn must not read the owner's memory through it,
nor a cloud machine's credentials through its metadata address. Each row is a way a model (or
a page or note steering it) could spell such an address."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent._web_address import refusal
from agent.policy import Allowed, Denied, PolicyConfig, evaluate_tool_call
from settings import DEFAULT_BASH_ALLOWLIST

REFUSED = [
    "http://127.0.0.1:8000/api/memories",
    "http://localhost:8000/api/memories",
    "http://LOCALHOST./api/memories",  # case and a trailing dot
    "http://app.localhost:8000/",
    "http://[::1]:8000/api/memories",
    "http://[::ffff:127.0.0.1]:8000/",  # IPv4 inside IPv6
    "http://[::ffff:7f00:1]/",
    "http://127.1:8000/",  # short form
    "http://2130706433:8000/",  # one number
    "http://0x7f000001/",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",  # octal
    "http://%31%32%37.0.0.1/",  # percent-encoded
    "http://0.0.0.0:8000/",
    "http://0/",
    "http://example.com@127.0.0.1:8000/",  # the host is after the @
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://10.0.0.7/",
    "http://192.168.1.1/admin",
    "http://172.16.5.4/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://127.0.0.1.nip.io:8000/",  # a public name that carries a private address
    "http://10-0-0-1.sslip.io/",
    "http://printer.local/",
    "http://metadata.google.internal/",
    "http://intranet/",  # no dot: a name only a local resolver knows
    "file:///etc/passwd",
    "ftp://example.com/",
    "http:///path-only",
    "",
    None,
    42,
]

ALLOWED = [
    "https://example.com/",
    "https://docs.python.org/3/library/ipaddress.html",
    "http://93.184.215.14/",
    "https://[2606:4700::1111]/",
    "https://release-1.2.3.4-notes.example.com/",  # numbers in a name, not a private address
]


@pytest.mark.parametrize("url", REFUSED)
def test_an_address_of_this_machine_or_a_private_network_is_refused(url: object) -> None:
    assert refusal(url) is not None


@pytest.mark.parametrize("url", ALLOWED)
def test_a_public_address_is_allowed(url: str) -> None:
    assert refusal(url) is None


def test_the_policy_refuses_the_fetch_with_a_reason_the_model_can_act_on(tmp_path: Path) -> None:
    config = PolicyConfig(
        workspace=tmp_path,
        bash_allowlist=frozenset(DEFAULT_BASH_ALLOWLIST),
        allowed_tools=("WebFetch",),
        denied_tools=(),
    )
    refused = evaluate_tool_call(
        "WebFetch", {"url": "http://127.0.0.1:8000/api/memories", "prompt": "list"}, config
    )
    assert isinstance(refused, Denied)
    assert "127.0.0.1" in refused.reason and refused.reason.endswith(".")
    allowed = evaluate_tool_call(
        "WebFetch", {"url": "https://example.com/", "prompt": "summarise"}, config
    )
    assert isinstance(allowed, Allowed)
