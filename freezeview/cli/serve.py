"""``freezeview serve MODEL.pt``: the app in a browser, through ``textual-serve``.

A user on a remote machine opens one URL instead of copying SVGs around: the web server
(textual-serve's, aiohttp) starts one app process per visitor, each with its own engine
process, and the browser shows the same screen as a terminal would. In the browser, ``g``
and ``e`` hand the pictures and the review page to the browser (``App.deliver_*``)
rather than leaving them on the server.

The server binds 127.0.0.1 by default and prints the SSH tunnel that reaches it from
another machine; binding any other address prints a warning, since the page has no
authentication (anyone who reaches the port runs freezeview as this user). Nothing
is fetched from elsewhere: textual-serve serves its own script, styles and fonts, and
its page's one outside reference (a web font stylesheet) is replaced by the font the
package ships (``ui/serve_page/app_index.html``), so it works offline.

``python -m freezeview.cli.serve MODEL.pt [app options]`` is what the server runs for
each visitor: the app with the web driver textual-serve sets up, without the check for
a terminal (its standard streams are the server's pipes).
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import socket
import sys
from pathlib import Path

__all__ = ["child_main", "register", "run", "serve_page_dir"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``serve`` subcommand."""
    parser = subparsers.add_parser(
        "serve",
        help="the app in a browser (one app per visitor; 127.0.0.1 unless --host)",
        description=(
            "Serve freezeview's app on MODEL.pt to browsers (textual-serve): each visitor "
            "gets their own app. Options after MODEL.pt are the app's (--preserve, "
            "--passes, --inputs, --input-shape, --eval, --import, --load-library, -o)."
        ),
        usage="freezeview serve [--host HOST] [--port PORT] [--public-url URL] "
        "MODEL.pt [app options]",
    )
    _add_serve_options(parser)
    parser.add_argument("model", metavar="MODEL.pt", help="a TorchScript file (torch.jit.save)")
    parser.add_argument(
        "app_options",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="the app's options, as for `freezeview MODEL.pt`",
    )
    parser.set_defaults(func=run)


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only; any other "
        "address is reachable by others, and the page has no authentication)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL browsers use to reach the server, when it is not http://HOST:PORT "
        "(a proxy, another port at the end of a tunnel)",
    )


def serve_page_dir() -> Path:
    """freezeview's copy of textual-serve's page template (no web font from elsewhere)."""
    return Path(__file__).resolve().parent.parent / "ui" / "serve_page"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(args: argparse.Namespace) -> tuple[argparse.Namespace, list[str]]:
    """Serve options given after MODEL.pt moved back to ``args``; the app's options."""
    late = argparse.ArgumentParser(add_help=False)
    late.add_argument("--host")
    late.add_argument("--port", type=int)
    late.add_argument("--public-url")
    found, rest = late.parse_known_args(list(args.app_options))
    for name in ("host", "port", "public_url"):
        if getattr(found, name) is not None:
            setattr(args, name, getattr(found, name))
    return args, rest


def public_url(host: str, port: int) -> str:
    """What browsers are told to open (and where the page's script connects back)."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def run(args: argparse.Namespace) -> int:
    """Run the web server until Ctrl-C; returns the exit code."""
    from ..engine.plumbing import BadInputError, PlanError

    args, app_options = _split(args)
    # The app's options are checked here, where a usage error can be read, not in a
    # browser later.
    from . import build_parser

    build_parser(("app",)).parse_args(["app", args.model, *app_options])
    path = Path(args.model)
    # What the app refuses before its screen (a typo, a state_dict, a pickle), refused
    # here before any browser connects, in the same sentence and without torch.
    from ..engine.load import check_model_kind

    check_model_kind(path)
    try:
        from textual_serve.server import Server
    except ImportError as exc:
        raise PlanError(
            "freezeview serve needs the textual-serve package: pip install textual-serve."
        ) from exc
    if not 0 < args.port < 65536:
        raise BadInputError(f"--port {args.port} is not a port number (1-65535).")
    url = args.public_url or public_url(args.host, args.port)
    command = shlex.join(
        [
            sys.executable,
            "-m",
            "freezeview.cli.serve",
            str(path.resolve()),
            *_absolute_paths(app_options),
        ]
    )
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold]freezeview serve:[/] {escape(path.name)} at [bold cyan]{url}[/]")
    if is_loopback(args.host):
        err.print(
            f"Only this machine can open it. From your own machine: "
            f"[bold]ssh -N -L {args.port}:127.0.0.1:{args.port} {escape(_login())}[/], "
            f"then open http://127.0.0.1:{args.port} there."
        )
    else:
        err.print(
            f"[bold yellow]warning:[/] listening on {escape(args.host)}: the page has no "
            "authentication. Anyone who can reach this port can open the model and run "
            "freezeview as you (export writes files). Prefer the default 127.0.0.1 and an "
            "SSH tunnel."
        )
    err.print("Each browser tab gets its own app; Ctrl-C stops the server.")
    server = Server(
        command,
        host=args.host,
        port=args.port,
        title=f"freezeview {path.name}",
        public_url=url,
        templates_path=serve_page_dir(),
    )
    server.serve()
    return 0


def _absolute_paths(options: list[str]) -> list[str]:
    """The app options with file arguments made absolute (the server's working directory
    is the user's; the app's is the same, but a path that says where it is reads better
    in the app's status line)."""
    out: list[str] = []
    takes_path = {"--inputs", "--load-library", "-o", "--output-dir"}
    previous = ""
    for option in options:
        if previous in takes_path and not option.startswith("-"):
            option = str(Path(option).resolve())
        out.append(option)
        previous = option
    return out


def _login() -> str:
    """``user@host`` as this machine names itself, for the tunnel hint."""
    import getpass

    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):
        user = None
    names: list[str] = []
    for ask in (socket.getfqdn, socket.gethostname):
        try:
            names.append(ask())
        except OSError:
            continue
    return tunnel_login(user, names)


def tunnel_login(user: str | None, names: list[str]) -> str:
    """``user@host`` for the SSH tunnel hint: the first of ``names`` (the machine's fully
    qualified name, then its host name) that another machine could reach, never a
    loopback name such as ``localhost`` (which would tunnel to the user's own machine);
    ``<user>`` and ``<this-host>`` where freezeview cannot tell."""
    host = next((n for n in names if n and not _is_loopback_name(n)), "<this-host>")
    return f"{user or '<user>'}@{host}"


def _is_loopback_name(name: str) -> bool:
    lowered = name.lower().rstrip(".")
    return (
        lowered in ("localhost", "ip6-localhost", "ip6-loopback")
        or lowered.startswith("localhost.")
        or is_loopback(lowered)
    )


def child_main(argv: list[str]) -> int:
    """One visitor's app (``python -m freezeview.cli.serve MODEL.pt [app options]``)."""
    from . import build_parser
    from .app import open_app

    args = build_parser(("app",)).parse_args(["app", *argv])
    return open_app(args)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
