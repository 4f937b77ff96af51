package dev.ortserve.protocol.anthropic.messages;

import dev.ortserve.protocol.Answer;
import dev.ortserve.wire.model.AnthropicContentBlock;
import dev.ortserve.wire.model.AnthropicContentBlockDeltaEvent;
import dev.ortserve.wire.model.AnthropicContentBlockStartEvent;
import dev.ortserve.wire.model.AnthropicContentBlockStopEvent;
import dev.ortserve.wire.model.AnthropicInputJsonDelta;
import dev.ortserve.wire.model.AnthropicMessage;
import dev.ortserve.wire.model.AnthropicMessageDeltaBody;
import dev.ortserve.wire.model.AnthropicMessageDeltaEvent;
import dev.ortserve.wire.model.AnthropicMessageStartEvent;
import dev.ortserve.wire.model.AnthropicMessageStopEvent;
import dev.ortserve.wire.model.AnthropicPingEvent;
import dev.ortserve.wire.model.AnthropicTextBlock;
import dev.ortserve.wire.model.AnthropicTextDelta;
import dev.ortserve.wire.model.AnthropicThinkingBlock;
import dev.ortserve.wire.model.AnthropicThinkingDelta;
import dev.ortserve.wire.model.AnthropicToolUseBlock;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.parse.ChatDeltaStream;
import dev.ortserve.parse.OutputParsers;
import io.smallrye.mutiny.Multi;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * One message's stream in Anthropic's event sequence: {@code message_start} and a {@code ping}
 * with the first token (when the prompt's cached tokens are known), then content blocks in the
 * order the parsers find them (thinking, text, tool_use: {@code content_block_start}, deltas,
 * {@code content_block_stop}), and at the end {@code message_delta} (stop_reason, usage) and
 * {@code message_stop}. The deltas of a block concatenate to what the non-stream message holds.
 */
final class MessageEvents {

    /** Why a message stopped, in Anthropic's words, and the stop sequence that did it (else null). */
    record Stop(String reason, String sequence) {
    }

    private enum Block { THINKING, TEXT, TOOL_USE }

    private final String id;
    private final String model;
    private final int promptTokens;
    private final ChatDeltaStream deltas;
    private final boolean oneCall;
    private final List<String> stops;
    /** thinking.display omitted: the thinking block opens and closes with no thinking_delta. */
    private final boolean omitThinking;

    private boolean started;
    private int cached;
    private int generated;
    private Block open;
    private int index = -1;
    private int calls;
    private boolean dropping;

    MessageEvents(String id, String model, int promptTokens, OutputParsers parsers, boolean oneCall, List<String> stops, boolean omitThinking) {
        this.omitThinking = omitThinking;
        this.id = id;
        this.model = model;
        this.promptTokens = promptTokens;
        this.deltas = new ChatDeltaStream(parsers);
        this.oneCall = oneCall;
        this.stops = stops;
    }

    Multi<Answer.Event> of(Multi<ChoiceEvent> events) {
        return events.onItem().transformToIterable(this::on);
    }

    private List<Answer.Event> on(ChoiceEvent e) {
        List<Answer.Event> out = new ArrayList<>();
        if (!started) {
            started = true;
            cached = e.cachedTokens();
            AnthropicMessage message = new AnthropicMessage().id(id).type(AnthropicMessage.TypeEnum.MESSAGE)
                    .role(AnthropicMessage.RoleEnum.ASSISTANT).model(model).content(new ArrayList<>())
                    .usage(MessagesProtocol.usage(promptTokens, cached, 0));
            out.add(event("message_start", new AnthropicMessageStartEvent().type(AnthropicMessageStartEvent.TypeEnum.MESSAGE_START).message(message)));
            out.add(event("ping", new AnthropicPingEvent().type(AnthropicPingEvent.TypeEnum.PING)));
        }
        generated++;
        boolean last = e.finish() != null;
        for (ChatDeltaStream.Delta d : deltas.add(e.textDelta(), last)) {
            if (d.reasoning() != null) {
                open(Block.THINKING, new AnthropicThinkingBlock().type("thinking").thinking("").signature(""), out);
                if (!omitThinking) out.add(delta(new AnthropicThinkingDelta().type("thinking_delta").thinking(d.reasoning())));
            } else if (d.content() != null) {
                open(Block.TEXT, new AnthropicTextBlock().type("text").text(""), out);
                out.add(delta(new AnthropicTextDelta().type("text_delta").text(d.content())));
            } else if (d.callStart()) {
                dropping = oneCall && calls > 0;
                if (dropping) continue;
                calls++;
                close(out);
                open(Block.TOOL_USE, new AnthropicToolUseBlock().type("tool_use").id(toolUseId()).name(d.name()).input(Map.of()), out);
            } else if (!dropping && !d.arguments().isEmpty()) {
                out.add(delta(new AnthropicInputJsonDelta().type("input_json_delta").partialJson(d.arguments())));
            }
        }
        if (last) {
            close(out);
            Stop stop = stop(e.finish(), e.stopReason(), calls > 0, stops);
            out.add(event("message_delta", new AnthropicMessageDeltaEvent().type(AnthropicMessageDeltaEvent.TypeEnum.MESSAGE_DELTA)
                    .delta(new AnthropicMessageDeltaBody().stopReason(AnthropicMessageDeltaBody.StopReasonEnum.fromString(stop.reason()))
                            .stopSequence(stop.sequence()))
                    .usage(MessagesProtocol.usage(promptTokens, cached, generated))));
            out.add(event("message_stop", new AnthropicMessageStopEvent().type(AnthropicMessageStopEvent.TypeEnum.MESSAGE_STOP)));
        }
        return out;
    }

    /** Opens a block of {@code kind} unless one is open already (a tool_use block is always new). */
    private void open(Block kind, AnthropicContentBlock start, List<Answer.Event> out) {
        if (open == kind && kind != Block.TOOL_USE) return;
        close(out);
        open = kind;
        index++;
        out.add(event("content_block_start", new AnthropicContentBlockStartEvent().type(AnthropicContentBlockStartEvent.TypeEnum.CONTENT_BLOCK_START)
                .index(index).contentBlock(start)));
    }

    private void close(List<Answer.Event> out) {
        if (open == null) return;
        out.add(event("content_block_stop", new AnthropicContentBlockStopEvent().type(AnthropicContentBlockStopEvent.TypeEnum.CONTENT_BLOCK_STOP)
                .index(index)));
        open = null;
    }

    private Answer.Event delta(dev.ortserve.wire.model.AnthropicBlockDelta delta) {
        return event("content_block_delta", new AnthropicContentBlockDeltaEvent().type(AnthropicContentBlockDeltaEvent.TypeEnum.CONTENT_BLOCK_DELTA)
                .index(index).delta(delta));
    }

    private static Answer.Event event(String type, Object payload) {
        return new Answer.Event(type, payload);
    }

    static String toolUseId() {
        return "toolu_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24);
    }

    /**
     * tool_use when the output is a call that ended by itself; max_tokens at the cap; stop_sequence
     * when one of the request's stop sequences ended it; end_turn otherwise.
     */
    static Stop stop(Finish finish, Object stopReason, boolean called, List<String> stops) {
        if (finish == Finish.LENGTH) return new Stop("max_tokens", null);
        if (called) return new Stop("tool_use", null);
        if (stopReason instanceof String s && stops != null && stops.contains(s)) return new Stop("stop_sequence", s);
        return new Stop("end_turn", null);
    }
}
