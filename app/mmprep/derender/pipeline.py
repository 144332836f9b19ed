"""One request's answer, from engine outputs to what the client sees: token ids through
the detokenizer and the stop conditions, then the reasoning parser, then the tool-call
parser, each piece by piece. A text engine's text skips the first two (the engine applied
its own stops); with no parser and no token ids nothing is done at all.

The same steps make the streamed and the whole answer: a non-streamed answer is the
streamed deltas put together, so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tokenizers import Tokenizer

from ..interface.engine import EngineError, EngineOutput
from ..interface.prepared import SamplingParams
from .detokenize import Detokenizer
from .logprobs import LogprobFormatter
from .options import OutputOptions
from .reasoning import REGISTRY as REASONING_PARSERS
from .reasoning import ReasoningParser, make_reasoning_parser
from .stops import StopChecker, StopRules
from .tools import REGISTRY as TOOL_PARSERS
from .tools import ToolCallDelta, ToolParser, new_tool_call_id


@dataclass(frozen=True)
class ModelFacts:
    """What derendering needs of the model folder: its tokenizer and its EOS ids
    (generation_config.json's eos_token_id, the tokenizer's own EOS token first)."""

    tokenizer: Tokenizer
    eos_token_ids: tuple[int, ...] = ()
    # a request's skip_special_tokens when it sends none (vLLM reads it in the generation config)
    skip_special_tokens: bool = True


@dataclass
class Delta:
    """What one step adds to the answer."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    logprobs: list[dict] | None = None  # None: not asked for

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning or self.tool_calls or self.logprobs)


class Derendering:
    """The server's derender setup: the model's facts (with --model) and its parsers."""

    def __init__(
        self,
        model: ModelFacts | None = None,
        reasoning_parser: str | None = None,
        tool_call_parser: str | None = None,
        enable_auto_tool_choice: bool = False,
        new_tool_id=new_tool_call_id,
        stream_partial_tool_calls: bool = False,
    ):
        self.model = model
        self.reasoning_parser = REASONING_PARSERS.check(reasoning_parser)  # a ValueError naming the choices
        TOOL_PARSERS.check(tool_call_parser)
        self.tool_call_parser = tool_call_parser if enable_auto_tool_choice else None
        self._new_tool_id = new_tool_id
        # a call shown as it is written, before it is known whole (tools/base.py): off, a call
        # that does not parse is content, as vLLM answers
        self.stream_partial_tool_calls = stream_partial_tool_calls

    def start(
        self,
        sampling: SamplingParams,
        options: OutputOptions | None = None,
        prompt_text: str = "",
        prompt_tokens: int = 0,
    ) -> Derenderer:
        return Derenderer(self, sampling, options or OutputOptions(), prompt_text, prompt_tokens)

    def plain(self) -> Derendering:
        """This setup without its parsers: a completion's text is parsed by no reasoning or
        tool-call parser (vLLM's completions parse none)."""
        return Derendering(self.model)

    def adjusted(self, options: OutputOptions) -> OutputOptions:
        """`options` as the tool-call parser needs them where it parses this request's calls
        (vLLM's adjust_request, made before the request's SamplingParams are: hermes keeps
        the special tokens)."""
        if self.tool_call_parser is None or not self.parses_tools(options):
            return options
        return TOOL_PARSERS.get(self.tool_call_parser).adjust(options)

    def parses_tools(self, options: OutputOptions) -> bool:
        """vLLM's rule: calls are parsed with --enable-auto-tool-choice, when the request
        has tools and did not say tool_choice "none"."""
        return self.tool_call_parser is not None and bool(options.tools) and options.tool_choice != "none"


class Derenderer:
    """One request's steps. `feed` each engine output, then `finish` once: when the
    engine ended, or as soon as `stopped` says the answer is over (close the engine)."""

    def __init__(
        self,
        setup: Derendering,
        sampling: SamplingParams,
        options: OutputOptions,
        prompt_text: str,
        prompt_tokens: int,
    ):
        model = setup.model
        if options.skip_special_tokens is None:
            default = model.skip_special_tokens if model is not None else True
            options = replace(options, skip_special_tokens=default)
        tool_name = setup.tool_call_parser if setup.parses_tools(options) else None
        tool_parser = TOOL_PARSERS.get(tool_name) if tool_name else None
        options = setup.adjusted(options)  # before the detokenizer reads them
        self._setup, self._options = setup, options
        self._logprobs = None
        self._stops = None
        if model is not None:
            detokenizer = Detokenizer(
                model.tokenizer,
                bool(options.skip_special_tokens),  # set above where the request left it None
                options.spaces_between_special_tokens,
            )
            rules = StopRules(
                stop=sampling.stop,
                stop_token_ids=sampling.stop_token_ids,
                eos_token_ids=model.eos_token_ids,
                ignore_eos=sampling.ignore_eos,
                min_tokens=sampling.min_tokens,
                max_tokens=sampling.max_tokens,
                include_stop_str_in_output=options.include_stop_str_in_output,
            )
            self._stops = StopChecker(rules, detokenizer)
            if sampling.logprobs:
                self._logprobs = LogprobFormatter(
                    model.tokenizer, sampling.top_logprobs, options.return_tokens_as_token_ids
                )
        self._tools: ToolParser | None = None
        if tool_parser is not None:
            self._tools = tool_parser(
                list(options.tools), setup._new_tool_id, setup.stream_partial_tool_calls
            )
        self._reasoning: ReasoningParser | None = None
        if setup.reasoning_parser is not None:
            self._reasoning = make_reasoning_parser(
                setup.reasoning_parser,
                options,
                prompt_text,
                tool_start=self._tools.reasoning_ends_on if self._tools else None,
            )
        self._passthrough = self._reasoning is None and self._tools is None
        self._engine_finish: str | None = None
        self._engine_tokens: int | None = None
        self.prompt_tokens = prompt_tokens
        self.tool_calls = 0
        self._finished = False

    @property
    def logprobs(self) -> bool:
        """Whether the answer carries logprobs (asked for, and token ids to give them of)."""
        return self._logprobs is not None

    @property
    def reasoning(self) -> bool:
        """Whether the answer has a reasoning part (a reasoning parser runs)."""
        return self._reasoning is not None

    @property
    def stopped(self) -> bool:
        """The answer ended here (a stop, or max_tokens): the engine must stop."""
        return self._stops is not None and self._stops.finish_reason is not None

    def feed(self, output: EngineOutput) -> Delta:
        if output.finish_reason is not None:
            self._engine_finish = output.finish_reason
        if output.prompt_tokens is not None:
            self.prompt_tokens = output.prompt_tokens
        if output.completion_tokens is not None:
            self._engine_tokens = output.completion_tokens
        logprobs = None
        token_ids: tuple[int, ...] = ()
        if output.token_ids:
            if self._stops is None:
                raise EngineError(
                    "the engine gave token ids, and this server has no tokenizer for them "
                    "(serve with --model)"
                )
            text, taken = _detokenize(self._stops, output.token_ids)
            token_ids = output.token_ids[:taken]
            if self._logprobs is not None:
                if len(output.logprobs) < taken:
                    raise EngineError(f"the engine gave {len(output.logprobs)} logprobs for {taken} tokens")
                logprobs = self._logprobs.entries(output.logprobs[:taken])
        else:
            text = output.text
        delta = self._parse(text, token_ids, final=False)
        delta.logprobs = logprobs
        return delta

    def finish(self) -> Delta:
        """The rest of the answer: what was held back, now that nothing can follow."""
        if self._finished:
            return Delta()
        self._finished = True
        text = self._stops.flush() if self._stops is not None else ""
        return self._parse(text, (), final=True)

    @property
    def finish_reason(self) -> str:
        reason = (
            (self._stops.finish_reason if self._stops is not None else None) or self._engine_finish or "stop"
        )
        return "tool_calls" if self.tool_calls and reason == "stop" else reason

    @property
    def stop_reason(self) -> str | int | None:
        return self._stops.stop_reason if self._stops is not None else None

    @property
    def completion_tokens(self) -> int:
        if self._stops is not None and self._stops.tokens:
            return self._stops.tokens
        return self._engine_tokens or 0

    def _parse(self, text: str, token_ids: tuple[int, ...], final: bool) -> Delta:
        if self._passthrough:
            return Delta(content=text)
        reasoning, content = text, ""
        if self._reasoning is not None:
            reasoning, content = self._reasoning.feed(text, token_ids)
            if final:
                more_reasoning, more_content = self._reasoning.finish()
                reasoning, content = reasoning + more_reasoning, content + more_content
        else:
            reasoning, content = "", text
        calls: list[ToolCallDelta] = []
        if self._tools is not None:
            content, calls = self._tools.feed(content, token_ids)
            if final:
                more_content, more_calls = self._tools.finish()
                content, calls = content + more_content, calls + more_calls
            if calls:
                if not self._options.parallel_tool_calls:
                    calls = [call for call in calls if call.index == 0]
                self.tool_calls += sum(call.id is not None for call in calls)
        if not self._options.include_reasoning:
            reasoning = ""
        return Delta(content=content, reasoning=reasoning, tool_calls=calls)


def _detokenize(stops: StopChecker, token_ids: tuple[int, ...]) -> tuple[str, int]:
    """The text of the ids up to a stop, and how many ids it took."""
    pieces: list[str] = []
    taken = 0
    for token_id in token_ids:
        if stops.finish_reason is not None:
            break  # the ids after a stop are not the answer's
        pieces.append(stops.push(token_id))
        taken += 1
    return "".join(pieces), taken
