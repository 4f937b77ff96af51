package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.generated.TokenizerApi;
import dev.ortserve.api.model.DetokenizeRequest;
import dev.ortserve.api.model.DetokenizeResponse;
import dev.ortserve.api.model.TokenizeChatRequest;
import dev.ortserve.api.model.TokenizeCompletionRequest;
import dev.ortserve.api.model.TokenizeResponse;
import dev.ortserve.api.union.TokenizeRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.ArrayList;
import java.util.List;

/** POST /tokenize and /detokenize, on the served model's own tokenizer (vLLM's utilities). */
public class TokenizerResource implements TokenizerApi {

    @Inject
    GenerationModelHost host;

    @Inject
    com.fasterxml.jackson.databind.ObjectMapper mapper;

    @Inject
    dev.ortserve.config.OrtserveConfig config;

    @Override
    public Uni<Response> tokenize(TokenizeRequest request) {
        if (request.value() instanceof TokenizeChatRequest chat) {
            if (chat.getModel() != null) host.requireModel(chat.getModel());
            if (Boolean.TRUE.equals(chat.getAddSpecialTokens())) {
                throw ApiException.unsupported("add_special_tokens", "With 'messages' the chat template places the special tokens; 'add_special_tokens' must be false.");
            }
            LoadedModel model = host.model();
            List<java.util.Map<String, Object>> tools = chat.getTools() == null || chat.getTools().isEmpty() ? null
                    : mapper.convertValue(chat.getTools(), new com.fasterxml.jackson.core.type.TypeReference<List<java.util.Map<String, Object>>>() { });
            // the same rendering path as /v1/chat/completions: what this counts is what the model is fed
            ChatPromptRenderer.Request promptRequest = new ChatPromptRenderer.Request(ChatRequests.templateMessages(chat.getMessages()), tools,
                    ChatRequests.documents(chat.getDocuments()), !Boolean.FALSE.equals(chat.getAddGenerationPrompt()),
                    Boolean.TRUE.equals(chat.getContinueFinalMessage()), chat.getChatTemplateKwargs(),
                    ChatRequests.requestTemplate(chat.getChatTemplate(), config.allowRequestChatTemplate()));
            return host.chatPrompts().renderOffIoThread(promptRequest)
                    .map(prompt -> answer(prompt.tokenIds(), Boolean.TRUE.equals(chat.getReturnTokenStrs()), model));
        }
        TokenizeCompletionRequest req = (TokenizeCompletionRequest) request.value();
        if (req.getModel() != null) host.requireModel(req.getModel());
        LoadedModel model = host.model();
        int[] ids = model.tokenizer().encode(req.getPrompt(), !Boolean.FALSE.equals(req.getAddSpecialTokens()));
        return Uni.createFrom().item(answer(ids, Boolean.TRUE.equals(req.getReturnTokenStrs()), model));
    }

    private Response answer(int[] ids, boolean strings, LoadedModel model) {
        List<Integer> tokens = new ArrayList<>(ids.length);
        for (int id : ids) tokens.add(id);
        TokenizeResponse response = new TokenizeResponse().tokens(tokens).count(ids.length).maxModelLen(model.spec().maxModelLen());
        if (strings) {
            response.tokenStrs(tokens.stream().map(model.tokenizer()::tokenText).toList());
        }
        return Response.ok(response).build();
    }

    @Override
    public Uni<Response> detokenize(DetokenizeRequest req) {
        if (req.getModel() != null) host.requireModel(req.getModel());
        LoadedModel model = host.model();
        int vocab = model.spec().vocabSize();
        int[] ids = new int[req.getTokens().size()];
        for (int i = 0; i < ids.length; i++) {
            Integer id = req.getTokens().get(i);
            if (id == null || id < 0 || id >= vocab) {
                throw ApiException.invalidRequest("tokens", "Token id " + id + " at index " + i + " is outside the vocabulary [0, " + vocab + ").");
            }
            ids[i] = id;
        }
        return Uni.createFrom().item(Response.ok(new DetokenizeResponse().prompt(model.tokenizer().decode(ids, false))).build());
    }
}
