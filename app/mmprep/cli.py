"""The `mmprep` command.

    mmprep serve [--port 8000] [--engine echo] [...]   the OpenAI-compatible service
    mmprep serve --help                                every setting, with its MMPREP_* variable
    mmprep worker [--port 8100] [--engine-class package.module:ClassName]
                                                       an engine behind HTTP, for --engine workers
    mmprep bench --url URL --video clip.mp4 [...]      video chat requests to any OpenAI-compatible server
    mmprep bench-decode VIDEO...                       decode_video against the usual loaders
    mmprep preview VIDEO_OR_URL [--fps R | --num-frames N] -o sheet.png
                                                       the frames the service would sample, as a contact sheet

Settings come from flags, then MMPREP_* environment variables, then defaults. A wrong
one stops the command with a message naming it.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
import textwrap
import typing

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, CliApp, CliSettingsSource, CliSubCommand, SettingsConfigDict

from .bench.config import BenchConfig, DecodeBenchConfig
from .core.config import ENV_PREFIX, WORKER_ENV_PREFIX, Settings, WorkerSettings, unknown_environment_settings
from .derender import REASONING_PARSERS, TOOL_PARSERS
from .preview.config import PreviewConfig
from .vllm_flags import VllmFlagRefused, from_vllm


def _with_choices(field: str, names: tuple[str, ...]):
    """A setting of Settings, its help naming the registry's choices."""
    description = Settings.model_fields[field].description
    return Field(None, description=f"{description}: {' or '.join([', '.join(names[:-1]), names[-1]])}")


class Serve(Settings):
    """Start the OpenAI-compatible preprocessing service."""

    # The parser flags take their choices from app/mmprep/derender's registries.
    reasoning_parser: str | None = _with_choices("reasoning_parser", REASONING_PARSERS.names())
    tool_call_parser: str | None = _with_choices("tool_call_parser", TOOL_PARSERS.names())

    @field_validator("reasoning_parser")
    @classmethod
    def _reasoning_parser_known(cls, name: str | None) -> str | None:
        return REASONING_PARSERS.check(name)

    @field_validator("tool_call_parser")
    @classmethod
    def _tool_call_parser_known(cls, name: str | None) -> str | None:
        return TOOL_PARSERS.check(name)

    def cli_cmd(self) -> None:
        from .api.app import create_app
        from .core.logging import configure_logging
        from .transport.server import serve

        log_config = configure_logging(self.log_level)
        settings = _loaded(Settings(**self.model_dump(exclude_unset=True)))
        _check_chat_templates(settings)
        if self.runtime == "ray":
            from .rayserve.run import run_on_ray

            raise SystemExit(run_on_ray(settings))
        if settings.processes > 1:
            from .transport.server import serve_processes

            raise SystemExit(serve_processes(settings, settings.processes, create_app))
        serve(create_app(settings), settings, log_config)


def _loaded(settings: Settings) -> Settings:
    """What the settings name loaded before any server starts (app/mmprep/service.py's
    load_resources, whose loads the service then takes from their caches): one that does not
    load stops the command naming the setting, as a wrong setting does."""
    from .service import SettingsError, load_resources

    try:
        return load_resources(settings)
    except SettingsError as error:
        print(f"mmprep: invalid {error.setting}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _check_chat_templates(settings: Settings) -> None:
    """With --model, its chat templates compiled before any server starts: one that does not
    compile stops the command naming its file and line, as a bad setting does (else the
    server's start would fail on it with jinja's traceback). Compiled once: the service's
    renderer takes the same from the cache."""
    if settings.model is None:
        return
    from .model import ModelFolderError, load_model_folder
    from .render import Renderer

    try:
        Renderer(
            load_model_folder(str(settings.model), settings.processor),
            chat_template=settings.chat_template,
            content_format=settings.chat_template_content_format,
        )
    except ModelFolderError as error:
        print(f"mmprep: invalid model: --model {settings.model}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


WORKER_KEEP_ALIVE_SECONDS = 75


class Worker(WorkerSettings):
    """Start a worker: one engine (the echo engine, or yours by --engine-class) behind HTTP."""

    def cli_cmd(self) -> None:
        import uvicorn

        from .core.logging import configure_logging
        from .engines.loading import make_engine
        from .workers.server import create_worker_app

        log_config = configure_logging(self.log_level)
        try:
            engine = make_engine(self.engine_class)
        except Exception as error:
            print(f"mmprep worker: cannot make the engine {self.engine_class}: {error}", file=sys.stderr)
            raise SystemExit(2) from error
        uvicorn.run(
            create_worker_app(engine, self.max_request_bytes),
            host=self.host,
            port=self.port,
            log_config=log_config,
            timeout_graceful_shutdown=30,
            # Longer than the frontend keeps an idle connection (5 s, engines/workers.py), so it
            # closes idle connections first and never sends a request into one being closed.
            timeout_keep_alive=WORKER_KEEP_ALIVE_SECONDS,
        )


class Bench(BenchConfig):
    """Send chat requests with video and images to an OpenAI-compatible server; report where the time goes."""

    def cli_cmd(self) -> None:
        from .bench.runner import run_bench

        raise SystemExit(run_bench(self))


class BenchDecode(DecodeBenchConfig):
    """Time decode_video against PyAV, transformers' and vLLM's loaders on the same files."""

    def cli_cmd(self) -> None:
        from .bench.decode import run_decode_bench

        raise SystemExit(run_decode_bench(self))


class Preview(PreviewConfig):
    """Draw the frames the service would sample from a video (or each video of a folder) as a contact sheet.

    Exit status: 0 when every sheet was drawn; 1 when some videos could not be (each named on
    stderr with the reason, then a summary line); 2 for bad input (nothing drawn)."""

    def cli_cmd(self) -> None:
        from .preview.command import run_preview

        raise SystemExit(run_preview(self))


class Mmprep(BaseSettings):
    # Every boolean is a flag with its --no- twin (--allow-private-networks, --no-stream).
    model_config = SettingsConfigDict(
        cli_prog_name="mmprep", cli_kebab_case=True, cli_hide_none_type=True, cli_implicit_flags=True
    )

    serve: CliSubCommand[Serve] = Field(description="the OpenAI-compatible preprocessing service")
    worker: CliSubCommand[Worker] = Field(description="an engine behind HTTP, for --engine workers")
    bench: CliSubCommand[Bench] = Field(
        description="chat requests with media to any OpenAI-compatible server"
    )
    bench_decode: CliSubCommand[BenchDecode] = Field(description="decode_video against the usual loaders")
    preview: CliSubCommand[Preview] = Field(
        description="the frames the service would sample, as a contact sheet"
    )

    def cli_cmd(self) -> None:
        CliApp.run_subcommand(self)


# Where the text of `mmprep --help`'s settings table starts: its rows are wrapped under it.
SUMMARY_COLUMN = 30


def _settings_summary(settings: type[BaseSettings], prefix: str) -> str:
    """Every setting of a command, a row each, for `mmprep --help`: the flag, then its
    description and variable from SUMMARY_COLUMN on (on the next line for a longer flag)."""
    rows = []
    for name, field in settings.model_fields.items():
        flag = "  --" + name.replace("_", "-")
        text = f"{field.description}  [{prefix}{name.upper()}]"
        if len(flag) < SUMMARY_COLUMN:
            rows.append(flag.ljust(SUMMARY_COLUMN) + text)
        else:
            rows += [flag, " " * SUMMARY_COLUMN + text]
    return "\n".join(rows)


Mmprep.__doc__ = (
    "mmprep: fetch, decode and sample video, images and audio for vision-language models.\n\n"
    "mmprep serve settings (flags; or the environment variables in brackets):\n"
    + _settings_summary(Serve, ENV_PREFIX)
    + "\n\nmmprep worker settings:\n"
    + _settings_summary(WorkerSettings, WORKER_ENV_PREFIX)
    + "\n\nmmprep bench --help and mmprep bench-decode --help list the benchmarks' flags; "
    "mmprep preview --help the contact sheet's."
)
SUBCOMMANDS = {"serve", "worker", "bench", "bench_decode", "preview"}


class MmprepHelp(argparse.HelpFormatter):
    """--help wrapped to the terminal, one default per flag.

    Descriptions are wrapped as the flags' help is: a docstring's paragraphs filled, and an
    indented line (a row of `mmprep --help`'s settings table) wrapped alone, under its text at
    SUMMARY_COLUMN. No line breaks inside a flag's name (`--upstream-` / `model`).

    pydantic-settings appends "(default: …)" to every description, so a description that
    explains its own default ("(default: the first model listed)") showed two, and an unset
    one showed the JSON word "null"."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is None:
            return None
        described, _, _ = text.rpartition(" (default: ")
        if "(default: " in described:
            return described
        return text.replace("(default: null)", "(default: none)")

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            _fill_paragraph(part, width, indent) for part in inspect.cleandoc(text).split("\n\n")
        )


def _fill_paragraph(paragraph: str, width: int, indent: str) -> str:
    """A paragraph's prose filled to `width`; each indented line (a table's row) wrapped
    alone, its continuation lines under the row's text."""
    out: list[str] = []
    prose: list[str] = []
    wrap = functools.partial(textwrap.fill, width=width, break_on_hyphens=False)
    for line in [*paragraph.splitlines(), ""]:
        if line and not line.startswith(" "):
            prose.append(line)
            continue
        if prose:
            out.append(wrap(" ".join(prose), initial_indent=indent, subsequent_indent=indent))
            prose = []
        if line:
            out.append(wrap(line, initial_indent=indent, subsequent_indent=indent + " " * SUMMARY_COLUMN))
    return "\n".join(out)


def _vllms_list_form(args: list[str]) -> list[str]:
    """`mmprep serve`'s list flags also in vLLM's form, several values after one flag
    (`--allowed-media-domains a.com b.org`, argparse's nargs="+"), as repeated flags."""
    if args[:1] != ["serve"]:  # other commands have positional arguments a list could swallow
        return args
    lists = {
        "--" + name.replace("_", "-")
        for name, field in Serve.model_fields.items()
        if typing.get_origin(field.annotation) is list
    }
    out: list[str] = []
    flag: str | None = None
    for arg in args:
        if arg.startswith("-"):
            name = arg.partition("=")[0]
            flag = name if name in lists else None
        elif flag is not None and out[-1] != flag:
            out.append(flag)  # a second value of the same list flag
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # vllm serve's command line: its flags and positional model (vllm_flags.py)
        try:
            args = ["serve", *from_vllm(args[1:])]
        except VllmFlagRefused as refused:
            print(str(refused), file=sys.stderr)
            return 2
    args = _vllms_list_form(args)
    if args[:1] in (["--version"], ["-V"]):
        from .core.version import VERSION

        print(f"mmprep {VERSION}")
        return 0
    unknown = unknown_environment_settings()
    if unknown:
        print(f"mmprep: unknown setting(s) in the environment: {', '.join(unknown)}", file=sys.stderr)
        return 2
    source: CliSettingsSource[argparse.ArgumentParser] = CliSettingsSource(Mmprep, formatter_class=MmprepHelp)
    try:
        CliApp.run(Mmprep, cli_args=args, cli_settings_source=source)
    except ValidationError as error:
        for problem in error.errors():  # one line each: the setting, and what is wrong with it
            where = ".".join(str(part) for part in problem["loc"] if part not in SUBCOMMANDS) or "settings"
            print(f"mmprep: invalid {where}: {problem['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # pydantic-settings' refusal of `mmprep` without a command
            print(exit_.code, file=sys.stderr)
            if "usage:" not in exit_.code:  # pydantic-settings before 2.9 shows no usage
                print(source.root_parser.format_usage(), end="", file=sys.stderr)
            return 2
        return int(exit_.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
