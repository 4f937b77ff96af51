package dev.ortserve.protocol.anthropic.messages;

import dev.ortserve.protocol.Answer;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.wire.model.AnthropicContentBlock;
import dev.ortserve.wire.model.AnthropicContentBlockParam;
import dev.ortserve.wire.model.AnthropicCountTokensRequest;
import dev.ortserve.wire.model.AnthropicCountTokensResponse;
import dev.ortserve.wire.model.AnthropicCreateMessageRequest;
import dev.ortserve.wire.model.AnthropicDocumentBlockParam;
import dev.ortserve.wire.model.AnthropicImageBlockParam;
import dev.ortserve.wire.model.AnthropicImageSource;
import dev.ortserve.wire.model.AnthropicInputMessage;
import dev.ortserve.wire.model.AnthropicMessage;
import dev.ortserve.wire.model.AnthropicRedactedThinkingBlockParam;
import dev.ortserve.wire.model.AnthropicTextBlock;
import dev.ortserve.wire.model.AnthropicTextBlockParam;
import dev.ortserve.wire.model.AnthropicThinkingBlock;
import dev.ortserve.wire.model.AnthropicThinkingAdaptive;
import dev.ortserve.wire.model.AnthropicThinkingBlockParam;
import dev.ortserve.wire.model.AnthropicThinkingConfig;
import dev.ortserve.wire.model.AnthropicThinkingDisplay;
import dev.ortserve.wire.model.AnthropicThinkingEnabled;
import dev.ortserve.wire.model.AnthropicToolReferenceBlockParam;
import dev.ortserve.wire.model.AnthropicTool;
import dev.ortserve.wire.model.AnthropicToolChoice;
import dev.ortserve.wire.model.AnthropicToolChoiceAny;
import dev.ortserve.wire.model.AnthropicToolChoiceAuto;
import dev.ortserve.wire.model.AnthropicToolChoiceNone;
import dev.ortserve.wire.model.AnthropicToolChoiceTool;
import dev.ortserve.wire.model.AnthropicToolResultBlockParam;
import dev.ortserve.wire.model.AnthropicToolUseBlock;
import dev.ortserve.wire.model.AnthropicToolUseBlockParam;
import dev.ortserve.wire.model.AnthropicUsage;
import dev.ortserve.wire.union.AnthropicContent;
import dev.ortserve.wire.union.AnthropicSystem;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.chat.ChatTurnRequest;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.chat.ChatTurnSpec;
import dev.ortserve.service.chat.ChatTurns;
import dev.ortserve.service.chat.StartedTurn;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API): the request turned
 * into the chat turn chat completions use (messages as the chat template receives them, tools
 * and tool_choice through the same parsers and grammar, thinking as the template's
 * {@code enable_thinking} switch and a token budget), and the turn's results as Anthropic's
 * message or its stream of events ({@link MessageEvents}).
 */
@ApplicationScoped
public class MessagesProtocol {

    @Inject
    CompletionService service;

    @Inject
    ChatTurns turns;

    @Inject
    ObjectMapper mapper;

    /** A request as the chat turn and the template take it: the turn, a reasoning budget or none, the messages. */
    private record Conversation(ChatTurnRequest turn, Integer budget, ChatPromptRenderer.Request prompt) {
    }

    public Uni<Answer> create(AnthropicCreateMessageRequest req) {
        turns.requireModel(req.getModel());
        Integer budget = req.getThinking() instanceof AnthropicThinkingEnabled on ? on.getBudgetTokens() : null;
        if (budget != null && budget >= req.getMaxTokens()) {
            throw new InvalidRequestException("thinking.budget_tokens", "'thinking.budget_tokens' (" + budget + ") must be less than 'max_tokens' ("
                    + req.getMaxTokens() + ").");
        }
        return turns.run(req.getModel(), req.getKeepAlive(), served -> spec(req, served), started -> answer(req, started));
    }

    private ChatTurnSpec spec(AnthropicCreateMessageRequest req, ServedModel served) {
        Conversation c = conversation(served, req.getSystem(), req.getMessages(), req.getTools(), req.getToolChoice(), req.getThinking(), true);
        int context = served.contextLength();
        return new ChatTurnSpec(c.turn(), c.budget(), "thinking.budget_tokens", c.prompt(), prompt -> {
            // max_tokens is a cap (Claude Code asks for 32000 whatever the model): lowered to what the context leaves
            int maxTokens = Math.max(1, Math.min(req.getMaxTokens(), context - prompt.tokenIds().length));
            return SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP())
                    .topK(req.getTopK()).maxTokens(maxTokens, "max_tokens").stop(stops(req));
        }, 1, "messages");
    }

    private Uni<Answer> answer(AnthropicCreateMessageRequest req, StartedTurn started) {
        ServedModel served = started.served();
        CompletionCall call = started.call();
        List<String> stops = stops(req);
        boolean oneCall = oneCall(req.getToolChoice());
        String id = "msg_" + UUID.randomUUID().toString().replace("-", "");
        if (Boolean.TRUE.equals(req.getStream())) {
            MessageEvents events = new MessageEvents(id, served.id(), promptTokens(call), started.parsers(), oneCall, stops,
                    omitsThinking(req.getThinking()));
            return Uni.createFrom().item(Answer.stream(events.of(service.stream(served, call))));
        }
        return service.complete(served, call).map(results -> Answer.json(message(id, served.id(), call, results.get(0), started.parsers(), oneCall, stops,
                omitsThinking(req.getThinking()))));
    }

    private static List<String> stops(AnthropicCreateMessageRequest req) {
        return req.getStopSequences() == null || req.getStopSequences().isEmpty() ? null : List.copyOf(req.getStopSequences());
    }

    /** {@code disable_parallel_tool_use}: at most one tool call in the answer. */
    private static boolean oneCall(AnthropicToolChoice toolChoice) {
        if (toolChoice instanceof AnthropicToolChoiceAny any) return Boolean.TRUE.equals(any.getDisableParallelToolUse());
        if (toolChoice instanceof AnthropicToolChoiceTool tool) return Boolean.TRUE.equals(tool.getDisableParallelToolUse());
        if (toolChoice instanceof AnthropicToolChoiceAuto auto) return Boolean.TRUE.equals(auto.getDisableParallelToolUse());
        return false;
    }

    /** {@code thinking.display: omitted}: thinking blocks are sent with empty text. */
    private static boolean omitsThinking(AnthropicThinkingConfig thinking) {
        AnthropicThinkingDisplay display = thinking instanceof AnthropicThinkingEnabled on ? on.getDisplay()
                : thinking instanceof AnthropicThinkingAdaptive adaptive ? adaptive.getDisplay() : null;
        return display == AnthropicThinkingDisplay.OMITTED;
    }

    /** The tokens of the prompt {@link #create} would render for the same conversation, tools included. */
    public Uni<AnthropicCountTokensResponse> countTokens(AnthropicCountTokensRequest req) {
        turns.requireModel(req.getModel());
        return turns.promptTokens(req.getModel(), served -> {
            Conversation c = conversation(served, req.getSystem(), req.getMessages(), req.getTools(), req.getToolChoice(), req.getThinking(), false);
            return new ChatTurnSpec(c.turn(), c.prompt(), prompt -> SamplingRequest.builder(), 1, "messages");
        }).map(tokens -> new AnthropicCountTokensResponse().inputTokens(tokens));
    }

    private Conversation conversation(ServedModel served, AnthropicSystem system, List<AnthropicInputMessage> messages, List<AnthropicTool> tools,
                                      AnthropicToolChoice toolChoice, AnthropicThinkingConfig thinking, boolean generate) {
        boolean hasTools = tools != null && !tools.isEmpty();
        ChatTurnRequest.ToolChoice choice = ChatTurnRequest.ToolChoice.AUTO;
        String forced = null;
        if (toolChoice instanceof AnthropicToolChoiceAny) {
            choice = ChatTurnRequest.ToolChoice.REQUIRED;
        } else if (toolChoice instanceof AnthropicToolChoiceTool tool) {
            choice = ChatTurnRequest.ToolChoice.FUNCTION;
            forced = tool.getName();
        } else if (toolChoice instanceof AnthropicToolChoiceNone) {
            choice = ChatTurnRequest.ToolChoice.NONE;
        }
        if (!hasTools && (choice == ChatTurnRequest.ToolChoice.REQUIRED || choice == ChatTurnRequest.ToolChoice.FUNCTION)) {
            throw new InvalidRequestException("tool_choice", "'tool_choice' '" + (forced == null ? "any" : "tool") + "' needs 'tools'.");
        }
        // adaptive: the model decides; a model that can think (it has a reasoning parser) may, others do not
        boolean thinks = thinking instanceof AnthropicThinkingEnabled
                || (thinking instanceof AnthropicThinkingAdaptive && served.reasoningParser() != null);
        if (thinking instanceof AnthropicThinkingEnabled && (choice == ChatTurnRequest.ToolChoice.REQUIRED || choice == ChatTurnRequest.ToolChoice.FUNCTION)) {
            throw new InvalidRequestException("thinking", "Thinking may not be enabled when 'tool_choice' forces tool use ('any' or 'tool').");
        }
        List<Map<String, Object>> templateTools = null;
        Map<String, Map<String, Object>> schemas = new LinkedHashMap<>();
        List<ImageInput> images = new ArrayList<>();
        List<Map<String, Object>> templateMessages = templateMessages(system, messages, images);
        if (hasTools) {
            templateTools = new ArrayList<>();
            Set<String> referenced = referencedTools(messages, tools);
            for (int i = 0; i < tools.size(); i++) {
                AnthropicTool t = tools.get(i);
                Map<String, Object> schema = schema(t.getInputSchema(), "tools[" + i + "].input_schema");
                if (schemas.put(t.getName(), schema) != null) {
                    throw new InvalidRequestException("tools[" + i + "].name", "Tool names must be unique; '" + t.getName() + "' is given twice.");
                }
                // a deferred tool is callable all along, but in the prompt only once a tool_reference loaded it
                if (Boolean.TRUE.equals(t.getDeferLoading()) && !referenced.contains(t.getName())) continue;
                Map<String, Object> function = new LinkedHashMap<>();
                function.put("name", t.getName());
                if (t.getDescription() != null) function.put("description", t.getDescription());
                function.put("parameters", schema);
                templateTools.add(Map.of("type", "function", "function", function));
            }
        }
        ChatTurnRequest turnRequest = new ChatTurnRequest(templateTools, schemas, choice, forced, null, images);
        // a turn that generates thinks within its budget, which the service checks against the model's reasoning parser
        Integer budget = generate && thinking instanceof AnthropicThinkingEnabled on ? on.getBudgetTokens() : null;
        if (!generate && thinking instanceof AnthropicThinkingEnabled && served.reasoningParser() == null) {
            throw new InvalidRequestException("thinking", "This model has no reasoning parser configured, so it cannot think "
                    + "(set ortserve.reasoning-parser for a reasoning model).");
        }
        // Anthropic's models think only when asked: the template's switch says so (templates without one ignore it)
        Map<String, Object> kwargs = Map.of("enable_thinking", thinks);
        ChatPromptRenderer.Request prompt = new ChatPromptRenderer.Request(templateMessages, templateTools, null,
                true, false, kwargs, null);
        return new Conversation(turnRequest, budget, prompt);
    }

    /** The names the conversation's tool_reference blocks load; each must be one of the request's tools. */
    private static Set<String> referencedTools(List<AnthropicInputMessage> messages, List<AnthropicTool> tools) {
        Set<String> names = new HashSet<>();
        for (AnthropicTool t : tools) names.add(t.getName());
        Set<String> referenced = new HashSet<>();
        for (int i = 0; i < messages.size(); i++) {
            AnthropicContent content = messages.get(i).getContent();
            if (content.isText()) continue;
            for (int j = 0; j < content.blocks().size(); j++) {
                if (!(content.blocks().get(j) instanceof AnthropicToolResultBlockParam r) || r.getContent() == null || r.getContent().isText()) continue;
                List<AnthropicContentBlockParam> inner = r.getContent().blocks();
                for (int k = 0; k < inner.size(); k++) {
                    if (inner.get(k) instanceof AnthropicToolReferenceBlockParam ref) {
                        if (!names.contains(ref.getToolName())) {
                            throw new InvalidRequestException("messages[" + i + "].content[" + j + "].content[" + k + "].tool_name",
                                    "Tool reference '" + ref.getToolName() + "' names no tool in 'tools'.");
                        }
                        referenced.add(ref.getToolName());
                    }
                }
            }
        }
        return referenced;
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> schema(Object inputSchema, String param) {
        if (!(inputSchema instanceof Map<?, ?> map)) {
            throw new InvalidRequestException(param, "'" + param + "' must be a JSON schema object.");
        }
        return (Map<String, Object>) map;
    }

    /**
     * The conversation as the chat template receives it: the system prompt first, each user
     * message's tool_result blocks as tool messages (in order) and its text as a user message,
     * each assistant message's text, thinking and tool_use blocks as content, reasoning_content
     * and tool_calls.
     */
    List<Map<String, Object>> templateMessages(AnthropicSystem system, List<AnthropicInputMessage> messages, List<ImageInput> images) {
        List<Map<String, Object>> out = new ArrayList<>();
        if (system != null) {
            String text = system.isText() ? system.text() : joined(system.blocks());
            out.add(message("system", text));
        }
        Map<String, String> toolNames = new LinkedHashMap<>();
        for (int i = 0; i < messages.size(); i++) {
            AnthropicInputMessage m = messages.get(i);
            String param = "messages[" + i + "].content";
            boolean user = m.getRole() == AnthropicInputMessage.RoleEnum.USER;
            AnthropicContent content = m.getContent();
            if (m.getRole() == AnthropicInputMessage.RoleEnum.SYSTEM) {
                // a system message inside the conversation (Claude Code sends them): text only, in its place
                out.add(message("system", content.isText() ? content.text() : systemText(content, param)));
                continue;
            }
            if (content.isText()) {
                out.add(message(user ? "user" : "assistant", content.text()));
                continue;
            }
            StringBuilder text = new StringBuilder();
            // a user message's blocks in order, its images among them (the template gets them only when there is one)
            List<Map<String, Object>> parts = new ArrayList<>();
            StringBuilder reasoning = new StringBuilder();
            List<Map<String, Object>> calls = new ArrayList<>();
            List<AnthropicContentBlockParam> blocks = content.blocks();
            for (int j = 0; j < blocks.size(); j++) {
                AnthropicContentBlockParam block = blocks.get(j);
                String at = param + "[" + j + "]";
                if (block instanceof AnthropicTextBlockParam t) {
                    if (text.length() > 0) text.append('\n');
                    text.append(t.getText());
                    parts.add(Map.of("type", "text", "text", t.getText()));
                } else if (block instanceof AnthropicImageBlockParam image && user) {
                    images.add(image(image, at));
                    parts.add(ImageInput.templatePart());
                } else if (block instanceof AnthropicDocumentBlockParam) {
                    throw new UnsupportedParameterException(at, "Content blocks of type 'document' are not supported.");
                } else if (block instanceof AnthropicToolResultBlockParam r && user) {
                    Map<String, Object> tool = new LinkedHashMap<>();
                    tool.put("role", "tool");
                    Object result = r.getContent() == null ? "" : r.getContent().isText() ? r.getContent().text() : toolResult(r.getContent(), at, images);
                    boolean error = Boolean.TRUE.equals(r.getIsError());
                    if (result instanceof String plain) {
                        tool.put("content", error ? "Error: " + plain : plain);
                    } else {
                        @SuppressWarnings("unchecked")
                        List<Map<String, Object>> withImages = (List<Map<String, Object>>) result;
                        if (error) withImages.add(0, Map.of("type", "text", "text", "Error:"));
                        tool.put("content", withImages);
                    }
                    tool.put("tool_call_id", r.getToolUseId());
                    String name = toolNames.get(r.getToolUseId());
                    if (name != null) tool.put("name", name);
                    out.add(tool);
                } else if (block instanceof AnthropicToolUseBlockParam u && !user) {
                    Map<String, Object> function = new LinkedHashMap<>();
                    function.put("name", u.getName());
                    function.put("arguments", u.getInput());
                    Map<String, Object> call = new LinkedHashMap<>();
                    call.put("id", u.getId());
                    call.put("type", "function");
                    call.put("function", function);
                    calls.add(call);
                    toolNames.put(u.getId(), u.getName());
                } else if (block instanceof AnthropicThinkingBlockParam th && !user) {
                    reasoning.append(th.getThinking());
                } else if (block instanceof AnthropicRedactedThinkingBlockParam && !user) {
                    // never produced by this server, so there is nothing it could read back: left out of the prompt
                } else {
                    throw new InvalidRequestException(at, "A " + (user ? "user" : "assistant") + " message cannot hold a '" + block.getType() + "' block.");
                }
            }
            if (user) {
                boolean withImages = parts.stream().anyMatch(p -> "image".equals(p.get("type")));
                if (withImages) {
                    Map<String, Object> u = new LinkedHashMap<>();
                    u.put("role", "user");
                    u.put("content", parts);
                    out.add(u);
                } else if (text.length() > 0 || out.isEmpty() || !"tool".equals(out.get(out.size() - 1).get("role"))) {
                    out.add(message("user", text.toString()));
                }
            } else {
                Map<String, Object> a = message("assistant", text.length() == 0 && !calls.isEmpty() ? null : text.toString());
                if (reasoning.length() > 0) a.put("reasoning_content", reasoning.toString());
                if (!calls.isEmpty()) a.put("tool_calls", calls);
                out.add(a);
            }
        }
        return out;
    }

    /** A tool result's blocks: their text, or, when they hold an image, their parts in order (a list). */
    private static Object toolResult(AnthropicContent content, String param, List<ImageInput> images) {
        StringBuilder out = new StringBuilder();
        List<Map<String, Object>> parts = new ArrayList<>();
        boolean withImages = false;
        List<AnthropicContentBlockParam> blocks = content.blocks();
        for (int k = 0; k < blocks.size(); k++) {
            String at = param + ".content[" + k + "]";
            if (blocks.get(k) instanceof AnthropicToolReferenceBlockParam) continue; // loads a deferred tool (referencedTools), no text
            if (blocks.get(k) instanceof AnthropicImageBlockParam image) {
                images.add(image(image, at));
                parts.add(ImageInput.templatePart());
                withImages = true;
                continue;
            }
            if (!(blocks.get(k) instanceof AnthropicTextBlockParam t)) {
                throw new UnsupportedParameterException(at, "Tool results of type '" + blocks.get(k).getType() + "' are not supported.");
            }
            if (out.length() > 0) out.append('\n');
            out.append(t.getText());
            parts.add(Map.of("type", "text", "text", t.getText()));
        }
        return withImages ? parts : out.toString();
    }

    /** An image block's source: base64 data with its media type, or a URL; the Files API's file source is refused. */
    private static ImageInput image(AnthropicImageBlockParam block, String param) {
        AnthropicImageSource source = block.getSource();
        String at = param + ".source";
        return switch (source.getType()) {
            case BASE64 -> {
                if (source.getData() == null || source.getMediaType() == null) {
                    throw new InvalidRequestException(at, "A base64 image source needs 'media_type' and 'data'.");
                }
                yield ImageInput.ofBase64(source.getData(), source.getMediaType().toString(), at + ".data");
            }
            case URL -> {
                if (source.getUrl() == null) throw new InvalidRequestException(at + ".url", "A url image source needs 'url'.");
                yield ImageInput.ofUrl(source.getUrl(), at + ".url");
            }
            case FILE -> throw new UnsupportedParameterException(at, "Image sources of type 'file' are not supported: this server has no Files API. "
                    + "Send the image as a base64 source.");
        };
    }

    private static String systemText(AnthropicContent content, String param) {
        List<AnthropicTextBlockParam> texts = new ArrayList<>();
        List<AnthropicContentBlockParam> blocks = content.blocks();
        for (int k = 0; k < blocks.size(); k++) {
            if (!(blocks.get(k) instanceof AnthropicTextBlockParam t)) {
                throw new InvalidRequestException(param + "[" + k + "]", "A system message holds text blocks only, not '" + blocks.get(k).getType() + "'.");
            }
            texts.add(t);
        }
        return joined(texts);
    }

    private static String joined(List<AnthropicTextBlockParam> blocks) {
        StringBuilder out = new StringBuilder();
        for (AnthropicTextBlockParam b : blocks) {
            if (out.length() > 0) out.append('\n');
            out.append(b.getText());
        }
        return out.toString();
    }

    private static Map<String, Object> message(String role, String content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        return m;
    }

    static int promptTokens(CompletionCall call) {
        return call.prompts().get(0).tokenIds().length;
    }

    private AnthropicMessage message(String id, String model, CompletionCall call, ChoiceResult r, OutputParsers parsing, boolean oneCall, List<String> stops,
                                     boolean omitThinking) {
        ChatOutput out = parsing.parse(r.text());
        List<AnthropicContentBlock> content = new ArrayList<>();
        if (out.reasoning() != null) {
            content.add(new AnthropicThinkingBlock().type("thinking").thinking(omitThinking ? "" : out.reasoning()).signature(""));
        }
        if (out.content() != null && !out.content().isEmpty()) content.add(new AnthropicTextBlock().type("text").text(out.content()));
        List<ToolCallParser.ToolCall> calls = oneCall && out.calls().size() > 1 ? out.calls().subList(0, 1) : out.calls();
        for (ToolCallParser.ToolCall c : calls) {
            content.add(new AnthropicToolUseBlock().type("tool_use").id(MessageEvents.toolUseId()).name(c.name()).input(input(c.arguments())));
        }
        MessageEvents.Stop stop = MessageEvents.stop(r.finishReason(), r.stopReason(), !calls.isEmpty(), stops);
        return new AnthropicMessage().id(id).type(AnthropicMessage.TypeEnum.MESSAGE).role(AnthropicMessage.RoleEnum.ASSISTANT)
                .model(model).content(content).stopReason(AnthropicMessage.StopReasonEnum.fromString(stop.reason()))
                .stopSequence(stop.sequence()).usage(usage(promptTokens(call), r.cachedTokens(), r.generatedTokens()));
    }

    /** A call's arguments as the object they are (the parsers hand over only JSON objects). */
    private Map<String, Object> input(String arguments) {
        try {
            return mapper.readValue(arguments, new TypeReference<LinkedHashMap<String, Object>>() { });
        } catch (Exception notAnObject) {
            return Map.of();
        }
    }

    /** Anthropic counts prompt tokens read from the cache apart from input_tokens. */
    static AnthropicUsage usage(int prompt, int cached, int output) {
        return new AnthropicUsage().inputTokens(prompt - cached).cacheReadInputTokens(cached).cacheCreationInputTokens(0).outputTokens(output);
    }
}
