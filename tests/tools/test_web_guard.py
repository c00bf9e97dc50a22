"""WebFetch reaches public addresses only (unless allowed), on every redirect, at the address
it checked; WebSearch asks a SearXNG instance set in config.toml.

A real HTTP server on 127.0.0.1 plays the page and the search service. Refused addresses are
refused before any connection, so nothing here sends traffic beyond 127.0.0.1.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from httpkit import QuietHandler, serving

from retinue.config import Settings
from retinue.engine import RunConfig, run
from retinue.errors import ConfigError
from retinue.messages import SystemMessage, ToolCall, ToolResultMessage, UserMessage
from retinue.policy.gate import Policy
from retinue.policy.modes import PermissionMode
from retinue.policy.rules import RuleSet
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.web import blocked_reason, make_web_fetch

pytestmark = pytest.mark.timeout(60)

RESULTS = {
    "query": "retinue",
    "results": [
        {"url": "https://docs.example.com/a", "title": "Docs", "content": "the docs"},
        {"url": "https://blog.other.org/b", "title": "Blog"},
        {"title": "no url: left out"},
    ],
}


class _Handler(QuietHandler):
    seen: ClassVar[list[str]] = []  # the paths asked, in order

    def do_GET(self) -> None:
        self.seen.append(self.path)
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if parts.path == "/host":
            self.send_body(f"host={self.headers['Host']}".encode())
        elif parts.path == "/to":  # /to?url=...: a redirect there
            self.redirect(query["url"][0])
        elif parts.path == "/far":  # a redirect to a URL longer than WebFetch takes
            self.redirect("http://other.test/" + "a" * 5000)
        elif parts.path == "/search" and query.get("format") == ["json"]:
            body = dict(RESULTS, query=query["q"][0])
            self.send_body(json.dumps(body).encode(), "application/json")
        elif parts.path == "/html/search":  # something else at that address
            self.send_body(b"<html>a web page</html>", "text/html")
        elif parts.path == "/locked/search":  # SearXNG without json in search.formats
            self.send_body(b"Forbidden", status=403)
        else:
            self.send_body(b"not here", status=404)


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    with serving(_Handler) as url:
        yield url


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(agent_id="agent-1", workspace=tmp_path, data_dir=tmp_path / "data")


async def fetch(ctx: ToolContext, url: str, **options: object) -> tuple[bool, str]:
    """(is_error, text) of one WebFetch call with these ``make_web_fetch`` options."""
    registry = ToolRegistry([make_web_fetch(**options)])  # type: ignore[arg-type]
    result = await registry.execute(ToolCall("c", "WebFetch", json.dumps({"url": url})), ctx)
    return result.is_error, result.content.removeprefix("Error: ")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local (cloud metadata"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("::ffff:169.254.169.254", "link-local (cloud metadata services answer there) "
         "address (IPv4 169.254.169.254 in IPv6 form)"),
        ("::ffff:10.0.0.1", "private address (IPv4 10.0.0.1 in IPv6 form)"),
        ("64:ff9b::a9fe:a9fe", "IPv4 169.254.169.254 in IPv6 form"),
        ("2002:a00:1::1", "IPv4 10.0.0.1 in IPv6 form"),
        ("fec0::1", "site-local"),
        ("240.0.0.1", "private"),
        ("::10.0.0.1", "reserved, not public"),
    ],
)  # fmt: skip
def test_addresses_that_are_not_public_are_named(address: str, reason: str) -> None:
    why = blocked_reason(ipaddress.ip_address(address))
    assert why is not None and reason in why


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None


async def test_loopback_is_refused_by_default_and_allowed_by_the_switch(
    ctx: ToolContext, server: str
) -> None:
    error, text = await fetch(ctx, f"{server}/host")
    assert error and text.startswith(f"refused to fetch {server}/host: 127.0.0.1, a loopback")
    assert "web_fetch_allow_private = true" in text and "\n" not in text
    assert _Handler.seen == []  # refused before connecting
    port = server.rsplit(":", 1)[1]
    for other in (f"http://[::1]:{port}/", f"http://2130706433:{port}/", f"http://127.1:{port}/"):
        error, text = await fetch(ctx, other)
        assert error and "loopback address" in text, other
    assert _Handler.seen == []
    error, text = await fetch(ctx, server)  # no path: no "redirect" said either
    assert error and text.startswith(f"refused to fetch {server}: 127.0.0.1, a loopback")
    error, text = await fetch(ctx, f"{server}/host", allow_private=True)
    assert not error and text.endswith(f"host=127.0.0.1:{port}")
    error, text = await fetch(ctx, f"{server}/host", allow_private=["127.0.0.0/8"])
    assert not error
    error, text = await fetch(ctx, f"{server}/host", allow_private=["192.168.0.0/16"])
    assert error and "loopback" in text


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/admin",
        "http://[::ffff:a9fe:a9fe]/latest/meta-data/",
        "http://metadata.test/computeMetadata/v1/",
    ],
)
async def test_a_redirect_to_another_host_is_reported_not_followed(
    ctx: ToolContext, server: str, target: str
) -> None:
    """Another host is never contacted, nor even resolved: fetching it is a new call, which
    the gate decides and which the private-address guard refuses."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        asked.append(host)
        return {"metadata.test": ["169.254.169.254"]}.get(host, [])

    start = f"{server}/to?url={target}"
    options = {"allow_private": ["127.0.0.1/32"], "resolve": resolve}
    error, text = await fetch(ctx, start, **options)
    assert not error, text
    assert text.startswith(f"{start} (HTTP 302) redirects to another host: {target}\n")
    assert "call WebFetch again" in text
    assert _Handler.seen == [f"/to?url={target}"] and asked == []  # the first hop only
    error, text = await fetch(ctx, target, **options)
    assert error and text.startswith(f"refused to fetch {target}: ")
    assert ("private address" in text) or ("link-local" in text)


async def test_a_redirect_to_a_url_longer_than_webfetch_takes_is_cut(
    ctx: ToolContext, server: str
) -> None:
    error, text = await fetch(ctx, f"{server}/far", allow_private=["127.0.0.1/32"])
    assert not error and "redirects to another host: http://other.test/aaa" in text
    assert "(cut: longer than WebFetch takes)" in text and len(text) < 4500


async def test_a_redirect_on_the_same_host_to_a_private_address_is_refused(
    ctx: ToolContext, server: str
) -> None:
    """A redirect on the same host is followed, and its address checked again (the name
    resolves elsewhere the second time)."""
    port = server.rsplit(":", 1)[1]
    answers = iter([["127.0.0.1"], ["10.0.0.9"]])

    async def resolve(host: str, port: int) -> Sequence[str]:
        return next(answers)

    target = f"http://site.test:{port}/host"
    start = f"http://site.test:{port}/to?url={target}"
    error, text = await fetch(ctx, start, allow_private=["127.0.0.1/32"], resolve=resolve)
    assert error and text.startswith(f"refused to fetch {target} (a redirect from {start}): ")
    assert "site.test resolves to 10.0.0.9, a private address" in text
    assert _Handler.seen == [f"/to?url={target}"]


@pytest.mark.parametrize(
    ("modes", "by_decision"),
    [
        (("default",), {"allow": ["WebFetch(domain:good.test)"]}),
        (("bypassPermissions",), {"deny": ["WebFetch(domain:evil.test)"]}),
    ],
)
async def test_the_gate_decides_a_redirect_to_another_host_as_a_new_fetch(
    tmp_path: Path,
    server: str,
    modes: tuple[PermissionMode, ...],
    by_decision: dict[str, list[str]],
) -> None:
    """An allow rule for good.test does not reach evil.test through good.test's redirect, and
    a deny rule for evil.test holds against it: the redirect comes back to the model, whose
    fetch of it the gate refuses (nobody is there to ask)."""
    port = server.rsplit(":", 1)[1]

    async def resolve(host: str, port: int) -> Sequence[str]:
        return ["127.0.0.1"]

    evil = f"http://evil.test:{port}/host"
    start = f"http://good.test:{port}/to?url={evil}"
    rules = RuleSet()
    for decision, texts in by_decision.items():
        rules.add(decision, texts, tmp_path)  # type: ignore[arg-type]
    ctx = ToolContext("main", tmp_path, tmp_path, gate=Policy(modes=modes, rules=rules))
    model = ScriptedModel([call_tool("WebFetch", {"url": start}),
                           call_tool("WebFetch", {"url": evil}), "done"])  # fmt: skip
    registry = ToolRegistry([make_web_fetch(allow_private=["127.0.0.1/32"], resolve=resolve)])
    await run(RunConfig(model, [SystemMessage("s"), UserMessage("go")], registry, ctx))
    first, second = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    assert not first.is_error and f"redirects to another host: {evil}" in first.content
    assert "host=evil.test" not in first.content
    assert second.is_error and "permission denied" in second.content
    assert _Handler.seen == [f"/to?url={evil}"]  # evil.test was never fetched


async def test_it_connects_to_the_address_it_checked_with_the_name_as_host(
    ctx: ToolContext, server: str
) -> None:
    port = server.rsplit(":", 1)[1]
    answers = iter([["127.0.0.1"], ["10.0.0.9"]])  # a name that changes its answer

    async def resolve(host: str, port: int) -> Sequence[str]:
        assert host == "site.test"
        return next(answers)

    allow = ["127.0.0.1/32"]
    url = f"http://site.test:{port}/host"
    error, text = await fetch(ctx, url, allow_private=allow, resolve=resolve)
    assert not error and text.endswith(f"host=site.test:{port}")  # reached without DNS
    error, text = await fetch(ctx, url, allow_private=allow, resolve=resolve)
    assert error and "site.test resolves to 10.0.0.9, a private address" in text

    async def mixed(host: str, port: int) -> Sequence[str]:
        return ["93.184.216.34", "10.0.0.9"]  # one bad answer is enough to refuse

    error, text = await fetch(ctx, "http://mixed.test/", resolve=mixed)
    assert error and "mixed.test resolves to 10.0.0.9" in text


async def test_a_name_that_does_not_resolve_is_unreachable(ctx: ToolContext) -> None:
    async def nothing(host: str, port: int) -> Sequence[str]:
        raise OSError("Name or service not known")

    error, text = await fetch(ctx, "http://nowhere.test/", resolve=nothing)
    assert error and "could not reach nowhere.test" in text and "does not resolve" in text


# --- WebSearch through config.toml --------------------------------------------------------


def runtime_with(tmp_path: Path, config: str) -> Runtime:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    settings = Settings.load(home=home, workspace=tmp_path)
    return Runtime.create(settings, model=ScriptedModel([]), with_memory=False)


async def search(runtime: Runtime, ctx: ToolContext, query: str) -> tuple[bool, str]:
    call = ToolCall("c", "WebSearch", json.dumps({"query": query}))
    result = await runtime.tools.execute(call, ctx)
    return result.is_error, result.content.removeprefix("Error: ")


async def test_web_search_asks_the_searxng_instance_in_config(
    tmp_path: Path, ctx: ToolContext, server: str
) -> None:
    runtime = runtime_with(tmp_path, f'web_search_url = "{server}"\n')
    error, text = await search(runtime, ctx, "retinue agents")
    assert not error, text
    assert text == (
        "1. Docs\n   https://docs.example.com/a\n   the docs\n\n2. Blog\n   https://blog.other.org/b"
    )
    assert _Handler.seen == ["/search?q=retinue+agents&format=json"]
    same = runtime_with(tmp_path, f'web_search_url = "{server}/search/"\n')
    assert (await search(same, ctx, "retinue agents"))[1] == text


async def test_web_search_errors_are_one_clear_line(
    tmp_path: Path, ctx: ToolContext, server: str
) -> None:
    off = runtime_with(tmp_path, "")
    error, text = await search(off, ctx, "anything")
    assert error and "WebSearch is not configured" in text and "web_search_url" in text
    missing = runtime_with(tmp_path, f'web_search_url = "{server}/nothing-here"\n')
    error, text = await search(missing, ctx, "anything")
    assert error and text.endswith("/nothing-here/search answered HTTP 404")
    locked = runtime_with(tmp_path, f'web_search_url = "{server}/locked"\n')
    error, text = await search(locked, ctx, "anything")
    assert error and "refused the JSON format (HTTP 403)" in text and "search.formats" in text
    other = runtime_with(tmp_path, f'web_search_url = "{server}/html"\n')
    error, text = await search(other, ctx, "anything")
    assert error and "did not answer with SearXNG's JSON" in text
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = runtime_with(tmp_path, f'web_search_url = "http://127.0.0.1:{port}"\n')
    error, text = await search(gone, ctx, "anything")
    assert error and "cannot be reached" in text and "\n" not in text


def test_bad_web_settings_are_config_errors(tmp_path: Path) -> None:
    for config, says in [
        ('web_search_url = "searx.local"\n', "web_search_url"),
        ("web_fetch_allow_private = 1\n", "web_fetch_allow_private"),
    ]:
        with pytest.raises(ConfigError, match=says):
            runtime_with(tmp_path, config)


async def test_the_private_switch_in_config_reaches_the_runtimes_web_fetch(
    tmp_path: Path, ctx: ToolContext, server: str
) -> None:
    call = ToolCall("c", "WebFetch", json.dumps({"url": f"{server}/host"}))
    default = await runtime_with(tmp_path, "").tools.execute(call, ctx)
    assert default.is_error and "loopback" in default.content
    allowed = runtime_with(tmp_path, "web_fetch_allow_private = true\n")
    fetched = await allowed.tools.execute(call, ctx)
    assert not fetched.is_error and "host=127.0.0.1" in fetched.content


# --- TLS: the checked address is dialled, the name is what the certificate must match ----


def self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A certificate for ``name`` (and its key), signed by itself."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_https_sends_the_name_as_sni_and_checks_the_certificate_against_it(
    tmp_path: Path, ctx: ToolContext
) -> None:
    cert, key = self_signed(tmp_path, "site.test")
    names: list[str | None] = []
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    server_side.sni_callback = lambda _sock, name, _ctx: names.append(name)
    with serving(_Handler, tls=server_side) as url:
        port = url.rsplit(":", 1)[1]

        async def resolve(host: str, port: int) -> Sequence[str]:
            return ["127.0.0.1"]

        trusting = ssl.create_default_context(cafile=cert)
        options = {"allow_private": ["127.0.0.1/32"], "resolve": resolve, "verify": trusting}
        error, text = await fetch(ctx, f"https://site.test:{port}/host", **options)
        assert not error, text
        assert text.endswith(f"host=site.test:{port}")
        error, text = await fetch(ctx, f"https://other.test:{port}/host", **options)
        assert error and "certificate" in text.lower()  # the name is checked, not the address
        del options["verify"]
        error, text = await fetch(ctx, f"https://site.test:{port}/host", **options)
        assert error and "certificate" in text.lower()  # self-signed: not trusted by default
    assert names[:2] == ["site.test", "other.test"]
