"""Who may talk to the plugin: requests that a web page of another site could make are refused.

A page the user visits can send requests to 127.0.0.1 (a cross-site form or `text/plain`
POST needs no permission), and a name it controls can be made to resolve to 127.0.0.1 (DNS
rebinding), which makes its requests same-origin. Against both, every route checks

- `Host`: a loopback name or address, the name TensorBoard was told to bind (`--host`), with
  `--bind_all` (or a wildcard `--host`) this machine's names or any IP address (an address
  cannot be rebound), or a name given with `--tvmdbg_allowed_hosts` (a reverse proxy);
- `Origin`, when the browser sends one: the request's own (its host:port is the `Host`);

and a request that is not GET/HEAD (it may change a live program's state) must also be a
POST with a JSON body and the `X-Tvmdbg-Dashboard` header. Only the dashboard's own script
sends that header: another site's page cannot without a CORS preflight, which nothing here
answers. Refusals are 4xx JSON errors like the other routes' (docs/security.md).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

from tensorboard.backend import http_util
from werkzeug import wrappers

DASHBOARD_HEADER = "X-Tvmdbg-Dashboard"
ALLOWED_HOSTS_FLAG = "tvmdbg_allowed_hosts"
_READ_METHODS = ("GET", "HEAD")
_WILDCARDS = ("", "0.0.0.0", "::")
_JSON = "application/json"


def split_host(value: str) -> tuple[str, str]:
    """("name or address", "port") of a Host header or an Origin's netloc, lower case, without
    brackets or a trailing dot; ("", "") when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):  # [v6]:port
        end = value.find("]")
        if end < 0:
            return "", ""
        host, rest = value[1:end], value[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            return "", ""
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    elif ":" in value:  # a bare IPv6 address
        host, port = value, ""
    else:
        host, port = value, ""
    if port and not port.isdigit():
        return "", ""
    return host.rstrip("."), port


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: never resolved by DNS
        return True
    address = _ip(name)
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


class RequestGuard:
    """The Host/Origin/state-change checks of one TensorBoard, from its flags."""

    def __init__(self, host: str | None = None, bind_all: bool = False, allowed_hosts: Iterable[str] = ()):
        bound = (host or "").strip().lower().strip("[]")
        self.wildcard = bool(bind_all) or (host is not None and bound in _WILDCARDS)
        names = {name.strip().lower().rstrip(".") for name in allowed_hosts if name.strip()}
        if bound and bound not in _WILDCARDS:
            names.add(bound.rstrip("."))
        if self.wildcard:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    names.add(name.lower().rstrip("."))
                    names.add(name.lower().split(".")[0])
        self.names = frozenset(names)
        self.extra = frozenset(name.strip().lower().rstrip(".") for name in allowed_hosts if name.strip())

    @classmethod
    def from_flags(cls, flags) -> RequestGuard:
        """From TensorBoard's parsed flags (None in tests: loopback only)."""
        allowed = getattr(flags, ALLOWED_HOSTS_FLAG, "") or ""
        return cls(
            host=getattr(flags, "host", None),
            bind_all=bool(getattr(flags, "bind_all", False)),
            allowed_hosts=[part for part in allowed.split(",") if part.strip()],
        )

    def host_allowed(self, name: str) -> bool:
        if not name:
            return False
        if _is_loopback(name) or name in self.names:
            return True
        return self.wildcard and _ip(name) is not None

    def refusal(self, environ: dict) -> tuple[int, str] | None:
        """(status, message) when the request must be refused, else None."""
        host_header = environ.get("HTTP_HOST") or ""
        host, _port = split_host(host_header)
        if not self.host_allowed(host):
            return 403, (
                f"refused: Host {host_header[:100]!r} is not this TensorBoard's (a loopback address, its --host, "
                "or with --bind_all this machine's names); a page on another name may be rebinding DNS. "
                f"Behind a proxy, start TensorBoard with --{ALLOWED_HOSTS_FLAG}=NAME"
            )
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None:
            netloc = origin.partition("://")[2] if "://" in origin else ""
            origin_host, _ = split_host(netloc)
            if netloc.lower() != host_header.strip().lower() and origin_host not in self.extra:
                return 403, (
                    f"refused: a request from the page of {origin[:100]!r}; this TensorBoard only answers its own pages"
                )
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method in _READ_METHODS:
            return None
        if method != "POST":
            return 405, f"refused: method {method[:20]}; the tvmdbg routes take GET, and POST for live commands"
        content_type = (environ.get("CONTENT_TYPE") or "").partition(";")[0].strip().lower()
        if content_type != _JSON:
            return 415, (
                f"refused: a POST must carry a JSON body (Content-Type: {_JSON}), not {content_type[:60] or 'none'!r}"
            )
        if not environ.get("HTTP_" + DASHBOARD_HEADER.upper().replace("-", "_")):
            return 403, f"refused: a POST must come from the dashboard (header {DASHBOARD_HEADER} missing)"
        return None

    def wrap(self, app: Callable) -> Callable:
        """The WSGI app `app` behind the checks."""

        def guarded(environ, start_response):
            refused = self.refusal(environ)
            if refused is None:
                return app(environ, start_response)
            status, message = refused
            request = wrappers.Request(environ)
            return http_util.Respond(request, {"error": message}, _JSON, code=status)(environ, start_response)

        guarded.__doc__ = app.__doc__
        return guarded
