package dev.ortserve.service.chat;

import dev.ortserve.engine.TokenConstraint;
import dev.ortserve.engine.PromptImages;
import dev.ortserve.image.PixelValues;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.worker.OffIoThread;
import dev.ortserve.service.VisionInput;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.Parsers;
import dev.ortserve.service.structured.StructuredOutputs;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.List;
import java.util.function.Function;

/**
 * Prepares and starts chat turns: one place that decides a turn's grammar and output parsers and renders its prompt into
 * the call to admit, for chat completions, Responses and Messages.
 */
@ApplicationScoped
public class ChatTurns {

    @Inject
    GenerationModelHost host;

    /** Checks the request's model name before anything else is done with the request (404 model_not_found). */
    public void requireModel(String model) {
        host.requireModel(model);
    }

    /**
     * The one entry of a chat turn, for every chat protocol: the model {@code model} names, loaded and held (its
     * {@code keepAlive} applied), from its load until {@code answer} is ready; {@code spec} maps the request onto that
     * model; the turn prepared from it ({@link #prepare}: images, tools and their parser, the grammar, a reasoning
     * budget), its prompt rendered and its call built ({@link #start}); {@code answer} streams or completes the call.
     */
    public <T> Uni<T> run(String model, String keepAlive, Function<ServedModel, ChatTurnSpec> spec, Function<StartedTurn, Uni<T>> answer) {
        return host.using(model, keepAlive, served -> {
            ChatTurnSpec s = spec.apply(served);
            return start(prepare(served, s), s.prompt(), s.sampling(), s.n(), s.promptParam()).flatMap(answer::apply);
        });
    }

    /** How many tokens {@link #run} would give the prompt {@code spec} asks for (Messages' count_tokens), the model held meanwhile. */
    public Uni<Integer> promptTokens(String model, Function<ServedModel, ChatTurnSpec> spec) {
        return host.using(model, served -> {
            ChatTurnSpec s = spec.apply(served);
            return promptTokens(prepare(served, s), s.prompt(), s.promptParam());
        });
    }

    private ChatTurn prepare(ServedModel served, ChatTurnSpec spec) {
        return spec.thinkingBudget() == null ? prepare(served, spec.request()) : prepare(served, spec.request(), spec.thinkingBudget(), spec.budgetParam());
    }

    /**
     * The one start of a chat turn: the prompt rendered (on a worker thread when the request brings its own template),
     * then the call built for it with the sampling {@code sampling} gives for that prompt (Messages lowers max_tokens to
     * what the context leaves). {@code promptParam} names the request field at fault when the prompt leaves no room.
     */
    public Uni<StartedTurn> start(ChatTurn turn, ChatPromptRenderer.Request prompt, Function<ChatPromptRenderer.Prompt, SamplingRequest.Builder> sampling,
                                  int n, String promptParam) {
        if (turn.images().isEmpty()) {
            return turn.served().chatPrompts().renderOffIoThread(prompt).map(rendered -> start(turn, new ExpandedPrompt(rendered, List.of()), sampling.apply(rendered), n, promptParam));
        }
        // images are read, decoded, preprocessed and encoded on a worker thread, the template rendered there with them
        return OffIoThread.run(() -> {
            ExpandedPrompt expanded = expand(turn.served(), turn.served().chatPrompts().render(prompt), turn.images(), turn.served().vision().prepared(),
                    promptParam);
            return start(turn, expanded, sampling.apply(expanded.prompt()), n, promptParam);
        });
    }

    /**
     * {@link #start(ChatTurn, ChatPromptRenderer.Request, Function, int, String)} for a prompt already rendered (by the protocol itself:
     * Responses' truncation) and expanded with the images it shows ({@link #expand}); blocking when it shows any (the caller is off the event
     * loop then: the images are encoded here).
     */
    public StartedTurn start(ChatTurn turn, ExpandedPrompt prompt, SamplingRequest.Builder sampling, int n, String promptParam) {
        PromptImages images = prompt.images().isEmpty() ? null : turn.served().vision().encode(prompt.prompt().tokenIds(), prompt.images());
        return new StartedTurn(turn, prompt.prompt(), turn.call(prompt.prompt(), images, sampling, n, promptParam));
    }

    /**
     * A prompt the protocol rendered itself with the placeholders of the {@code shown} images (truncation may have dropped turns
     * that held others) expanded to their tokens: its length is the prompt's length as the model reads it (an image is hundreds of
     * tokens). Each image read and preprocessed once per request ({@code prepared}); blocking when it shows any.
     */
    public ExpandedPrompt expand(ServedModel served, ChatPromptRenderer.Prompt rendered, List<ImageInput> shown, VisionInput.Prepared prepared,
                                 String promptParam) {
        if (shown.isEmpty()) return new ExpandedPrompt(rendered, List.of());
        List<PixelValues> images = prepared.of(shown);
        String text = served.vision().expand(rendered.text(), images, promptParam);
        return new ExpandedPrompt(new ChatPromptRenderer.Prompt(text, served.model().tokenizer().encode(text, false)), images);
    }

    /** A prompt with its images' tokens in place of their placeholders, and those images preprocessed (not encoded yet); none: text only. */
    public record ExpandedPrompt(ChatPromptRenderer.Prompt prompt, List<PixelValues> images) {
    }

    /**
     * How many tokens {@link #start} would give the prompt, its images' tokens counted (Messages' count_tokens): the
     * images read and preprocessed (not encoded) on a worker thread.
     */
    public Uni<Integer> promptTokens(ChatTurn turn, ChatPromptRenderer.Request prompt, String promptParam) {
        if (turn.images().isEmpty()) return turn.served().chatPrompts().renderOffIoThread(prompt).map(p -> p.tokenIds().length);
        return OffIoThread.run(() -> turn.served().model().tokenizer().encode(turn.served().vision().expandedText(
                turn.served().chatPrompts().render(prompt).text(), turn.images(), promptParam), false).length);
    }

    /** The turn {@code request} asks of {@code served} (the model the request resolved). */
    public ChatTurn prepare(ServedModel served, ChatTurnRequest request) {
        ImageInput.requireImageModel(served, request.images());
        // tools whose calls are parsed need the model's tool-call parser (every protocol's turn is refused here alike;
        // tool_choice none: the tools still reach the template, the output is never parsed)
        if (request.hasTools() && request.choice() != ChatTurnRequest.ToolChoice.NONE && served.toolCallParser() == null) {
            throw new UnsupportedParameterException("tools", served.parsers().toolsRefusal());
        }
        TokenConstraint constraint = constraint(served, request);
        // tool_choice none: the tools still reach the template, the output is never parsed
        boolean parseTools = request.hasTools() && request.choice() != ChatTurnRequest.ToolChoice.NONE;
        // under a grammar the output is the JSON (or the call) itself: no reasoning block to split off
        OutputParsers parsers = new OutputParsers(constraint == null ? served.reasoningParser() : null, !parseTools ? null
                : request.forcedCall() ? Parsers.forcedCalls(served.toolCallParser()) : served.toolCallParser(), request.toolSchemas());
        return new ChatTurn(parsers, constraint, served, request.images());
    }

    /**
     * A turn whose reasoning is capped at {@code thinkingBudget} tokens ({@link ThinkingBudget});
     * the model must have a think-tag reasoning parser whose markers are single tokens, and the
     * turn no grammar of its own (a forced call or a format leaves no reasoning to cap).
     *
     * @param budgetParam the request field of the budget, named in its errors
     */
    public ChatTurn prepare(ServedModel served, ChatTurnRequest request, int thinkingBudget, String budgetParam) {
        ChatTurn turn = prepare(served, request);
        if (turn.constraint() != null) {
            throw new InvalidRequestException(budgetParam, "A reasoning budget cannot be combined with a forced tool call or an output format.");
        }
        if (served.reasoningParser() == null) {
            throw new InvalidRequestException(budgetParam, "This model has no reasoning parser configured, so it cannot think within a budget "
                    + "(set ortserve.reasoning-parser for a reasoning model).");
        }
        ThinkingBudget budget = ThinkingBudget.of(served.reasoningParser(), thinkingBudget, served.model().tokenizer());
        if (budget == null) {
            throw new InvalidRequestException(budgetParam, "A reasoning budget needs the model's end-of-thinking marker to be one token; "
                    + "it is not for the '" + served.reasoningParser().name() + "' reasoning parser on this model.");
        }
        return turn.withConstraint(budget);
    }

    /** The grammar the output must follow: a forced tool call, or the output format; null for free text. */
    private static TokenConstraint constraint(ServedModel served, ChatTurnRequest request) {
        StructuredOutputs structured = served.structured();
        ChatTurnRequest.OutputFormat format = request.format();
        if (request.forcedCall()) {
            if (format != null) {
                throw new InvalidRequestException(format.param(), "'" + format.param() + "' cannot be combined with a forced tool call.");
            }
            return structured.toolCall(served.toolCallParser(), request.toolSchemas(),
                    request.choice() == ChatTurnRequest.ToolChoice.FUNCTION ? request.forcedFunction() : null, "tool_choice");
        }
        if (format == null) return null;
        return switch (format.kind()) {
            case JSON_OBJECT -> structured.jsonObject();
            case JSON_SCHEMA -> structured.jsonSchema(format.schema(), format.schemaParam());
        };
    }
}
