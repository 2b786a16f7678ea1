"""A command shell for the analyzer: argparse per command, `> file` redirection, readline
history and completion in a terminal, and a transcript (each command echoed after the prompt)
when commands come from a pipe.

Subclasses register commands with `add(...)`; each command returns its output as lines, or a
Stop to end the loop."""

from __future__ import annotations

import argparse
import cmd
import os
from collections.abc import Callable

from tvmdbg_tb.cli.render import Style
from tvmdbg_tb.cli.session import CliError
from tvmdbg_tb.cli.terminal import guarded

PROMPT = "tvmdbg> "


class CommandParser(argparse.ArgumentParser):
    """argparse for one analyzer command: errors become CliError instead of exiting."""

    def __init__(self, prog: str, description: str, epilog: str | None = None):
        super().__init__(
            prog=prog,
            description=description,
            epilog=epilog,
            add_help=False,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    def error(self, message: str):
        raise CliError(f"{self.prog}: {message}\nusage: {self.format_usage().split(':', 1)[1].strip()}")

    def exit(self, status=0, message=None):
        raise CliError(message or f"{self.prog}: bad arguments")


def split_command(line: str) -> tuple[list[str], str | None, bool]:
    """Words of a command line (brackets and quotes keep spaces) and a `> file` or `>> file`
    redirection: (words, file or None, append)."""
    words: list[str] = []
    word, depth, quote, started = "", 0, None, False
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
            else:
                word += ch
            continue
        if ch in "\"'" and depth == 0:
            quote, started = ch, True
            continue
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch.isspace() and depth == 0:
            if word or started:
                words.append(word)
            word, started = "", False
            continue
        word += ch
    if quote:
        raise CliError(f"unclosed quote {quote} in: {line}")
    if word or started:
        words.append(word)
    target, append = None, False
    for i, w in enumerate(words):
        if w.startswith(">"):
            append = w.startswith(">>")
            rest = w[2:] if append else w[1:]
            tail = words[i + 1 :]
            if rest:
                target, tail = rest, tail
            elif tail:
                target, tail = tail[0], tail[1:]
            else:
                raise CliError("redirection `>` needs a file name")
            if tail:
                raise CliError(f"unexpected words after the redirection: {' '.join(tail)}")
            words = words[:i]
            break
    return words, target, append


class Command:
    """One analyzer command: its parser and the function producing its lines."""

    def __init__(self, name: str, summary: str, parser: CommandParser, run: Callable, aliases=()):
        self.name, self.summary, self.parser, self.run, self.aliases = name, summary, parser, run, tuple(aliases)


class Stop:
    """The result of a command that ends the loop."""

    def __init__(self, lines: list[str]):
        self.lines = lines


class Shell(cmd.Cmd):
    """The loop around the commands; see the module docstring."""

    prompt = PROMPT
    # Exceptions that are the user's mistake (or a dump's gap): printed as one line, not raised.
    user_errors: tuple[type[BaseException], ...] = (CliError, ValueError, KeyError, IndexError)
    help_notes: tuple[str, ...] = ()

    def __init__(self, stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        interactive = _isatty(self.stdin) and _isatty(self.stdout)
        self.use_rawinput = interactive and stdin is None
        self.echo = not _isatty(self.stdin)
        if self.echo:
            self.prompt = ""  # a piped session prints each command after the prompt instead
        self.style = Style.for_stream(self.stdout)
        self.commands: dict[str, Command] = {}

    # -- hooks for subclasses --------------------------------------------------------------

    def before_command(self) -> None:
        """Called before each command runs."""

    def on_quit(self) -> None:
        """Called when the user leaves (quit, or end of input)."""

    def complete_argument(self, command: str, text: str) -> list[str]:
        """Completions of an argument of command."""
        return []

    # -- the loop --------------------------------------------------------------------------

    def preloop(self) -> None:
        if self.use_rawinput:
            try:
                import readline
            except ImportError:
                return
            self._old_completer = readline.get_completer()
            readline.set_completer(self.complete)
            readline.parse_and_bind(f"{self.completekey}: complete")
            readline.set_completer_delims(" \t\n")
            path = _history_path()
            if path:
                try:
                    readline.read_history_file(path)
                except OSError:
                    pass
                readline.set_history_length(1000)

    def postloop(self) -> None:
        if self.use_rawinput:
            path = _history_path()
            try:
                import readline

                readline.set_completer(self._old_completer)
                if path:
                    readline.write_history_file(path)
            except (ImportError, OSError):
                pass

    def cmdloop(self, intro: str | None = None) -> None:
        """cmd's loop, where Ctrl-C abandons the line being typed instead of the session."""
        self.preloop()
        try:
            if intro:
                self.stdout.write(intro + "\n")
            stop = False
            while not stop:
                try:
                    line = self._read_line()
                    stop = self.onecmd(self.precmd(line))
                except KeyboardInterrupt:
                    self.stdout.write("^C (type quit to leave)\n")
        finally:
            self.postloop()

    def _read_line(self) -> str:
        if self.use_rawinput:
            try:
                return input(self.prompt)
            except EOFError:
                return "EOF"
        self.stdout.write(self.prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        return line.rstrip("\r\n") if line else "EOF"

    def precmd(self, line: str) -> str:
        if self.echo and line and line != "EOF":
            self.stdout.write(PROMPT + line.rstrip("\n") + "\n")
        return line

    def emptyline(self) -> bool:
        return False

    def onecmd(self, line: str) -> bool:
        line = line.strip()
        if not line or line.startswith("#"):
            return False
        if line == "EOF":
            if self.use_rawinput:
                self.stdout.write("\n")
            return self._quit()
        try:
            words, target, append = split_command(line)
        except CliError as error:
            self._write([f"error: {error}"], self.stdout, self.style)
            return False
        if not words:
            return False
        name = words[0]
        command = self._command(name)
        if command is None:
            self._write([f"error: unknown command {name!r}; type `help` for the list"], self.stdout, self.style)
            return False
        stream, style = self.stdout, self.style
        if target:
            try:
                stream = guarded(open(os.path.expanduser(target), "a" if append else "w"))
            except OSError as error:
                self._write([f"error: cannot write {target}: {error.strerror}"], self.stdout, self.style)
                return False
            style = Style(False)
        stop = False
        try:
            self.before_command()
            args = words[1:]
            if "-h" in args or "--help" in args:
                lines = command.parser.format_help().rstrip("\n").split("\n")
            else:
                result = command.run(command.parser.parse_args(args), style)
                if isinstance(result, Stop):
                    stop, lines = True, result.lines
                else:
                    lines = result
            self._write(lines, stream, style)
            if target:
                self._write([f"(output written to {target})"], self.stdout, self.style)
        except self.user_errors as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            self._write([f"error: {message}"], self.stdout, self.style)
        finally:
            if target:
                stream.close()
        return stop

    def _write(self, lines: list[str], stream, style: Style) -> None:
        stream.write("".join(line + "\n" for line in lines))
        stream.flush()

    def _command(self, name: str) -> Command | None:
        for command in self.commands.values():
            if name == command.name or name in command.aliases:
                return command
        return None

    def _quit(self) -> bool:
        self.on_quit()
        return True

    # -- completion ------------------------------------------------------------------------

    def completenames(self, text: str, *ignored) -> list[str]:
        names = [c.name for c in self.commands.values()] + [a for c in self.commands.values() for a in c.aliases]
        return sorted(n + " " for n in names if n.startswith(text))

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        words = line.split()
        return self.complete_argument(words[0] if words else "", text)

    def complete_help(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self.completenames(text)

    # -- commands --------------------------------------------------------------------------

    # -- commands --------------------------------------------------------------------------

    def add(self, name: str, summary: str, description: str, epilog: str | None, run: Callable, aliases=()):
        """Registers a command; returns its parser for the caller to add arguments to."""
        parser = CommandParser(name, f"{summary}\n\n{description}".strip(), epilog)
        self.commands[name] = Command(name, summary, parser, run, aliases)
        return parser

    def add_help_and_quit(self, leave: str) -> None:
        p = self.add("help", "List commands, or show one command's help.", "", None, self.cmd_help, aliases=("h",))
        p.add_argument("command", nargs="?")
        self.add("quit", leave, "", None, self.cmd_quit, aliases=("exit", "q"))

    def cmd_help(self, args, style: Style) -> list[str]:
        if args.command:
            command = self._command(args.command)
            if command is None:
                raise CliError(f"unknown command {args.command!r}")
            return command.parser.format_help().rstrip("\n").split("\n")
        width = max(len(n) for n in self.commands)
        lines = ["Commands (`help CMD` or `CMD -h` for details):"]
        for c in self.commands.values():
            alias = f" (also {', '.join(c.aliases)})" if c.aliases else ""
            lines.append(f"  {c.name.ljust(width)}  {c.summary}{alias}")
        lines += [
            "",
            *self.help_notes,
            "Any command's output can be saved with `> FILE` (or appended with `>> FILE`).",
        ]
        return lines

    def cmd_quit(self, args, style: Style):
        self._quit()
        return Stop([])


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _history_path() -> str | None:
    path = os.environ.get("TVMDBG_HISTORY", "~/.tvmdbg_history")
    return os.path.expanduser(path) if path else None


def run_commands(shell: Shell, commands: list[str]) -> bool:
    """Runs commands as if typed, each echoed after the prompt (for `tvmdbg analyze -x CMD`);
    True if one of them ended the session."""
    for line in commands:
        shell.stdout.write(PROMPT + line + "\n")
        if shell.onecmd(line):
            return True
    return False
