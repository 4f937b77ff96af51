package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.protocol.openai.chat.ChatMessages;
import dev.ortserve.api.generated.TokenizerApi;
import dev.ortserve.wire.model.DetokenizeRequest;
import dev.ortserve.wire.model.DetokenizeResponse;
import dev.ortserve.wire.model.TokenizeChatRequest;
import dev.ortserve.wire.model.TokenizeCompletionRequest;
import dev.ortserve.wire.model.TokenizeResponse;
import dev.ortserve.wire.union.TokenizeRequest;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.TokenizerService;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.List;

/** POST /tokenize and /detokenize, on the named model's own tokenizer (vLLM's utilities; no model: the first pinned one). */
public class TokenizerResource implements TokenizerApi {

    @Inject
    GenerationModelHost host;

    @Inject
    TokenizerService tokenizer;

    @Inject
    com.fasterxml.jackson.databind.ObjectMapper mapper;

    @Inject
    dev.ortserve.config.OrtserveConfig config;

    @Override
    public Uni<Response> tokenize(TokenizeRequest request) {
        if (request.value() instanceof TokenizeChatRequest chat) {
            host.requireModel(chat.getModel());
            if (Boolean.TRUE.equals(chat.getAddSpecialTokens())) {
                throw ApiException.unsupported("add_special_tokens", "With 'messages' the chat template places the special tokens; 'add_special_tokens' must be false.");
            }
            List<java.util.Map<String, Object>> tools = chat.getTools() == null || chat.getTools().isEmpty() ? null
                    : mapper.convertValue(chat.getTools(), new com.fasterxml.jackson.core.type.TypeReference<List<java.util.Map<String, Object>>>() { });
            List<dev.ortserve.service.ImageInput> images = new java.util.ArrayList<>();
            ChatPromptRenderer.Request promptRequest = new ChatPromptRenderer.Request(ChatMessages.templateMessages(chat.getMessages(), images), tools,
                    ChatMessages.documents(chat.getDocuments()), !Boolean.FALSE.equals(chat.getAddGenerationPrompt()),
                    Boolean.TRUE.equals(chat.getContinueFinalMessage()), chat.getChatTemplateKwargs(),
                    ChatMessages.requestTemplate(chat.getChatTemplate(), config.allowRequestChatTemplate()));
            return host.using(chat.getModel(), served -> tokenizer.chat(served, promptRequest, images, Boolean.TRUE.equals(chat.getReturnTokenStrs())))
                    .map(TokenizerResource::answer);
        }
        TokenizeCompletionRequest req = (TokenizeCompletionRequest) request.value();
        return host.using(req.getModel(), served -> Uni.createFrom().item(() -> answer(tokenizer.text(served, req.getPrompt(),
                !Boolean.FALSE.equals(req.getAddSpecialTokens()), Boolean.TRUE.equals(req.getReturnTokenStrs())))));
    }

    private static Response answer(TokenizerService.Tokens tokens) {
        TokenizeResponse response = new TokenizeResponse().tokens(tokens.ids()).count(tokens.ids().size()).maxModelLen(tokens.maxModelLen());
        if (tokens.strings() != null) {
            response.tokenStrs(tokens.strings());
        }
        return Response.ok(response).build();
    }

    @Override
    public Uni<Response> detokenize(DetokenizeRequest req) {
        return host.using(req.getModel(), served -> Uni.createFrom().item(() -> Response.ok(new DetokenizeResponse()
                .prompt(tokenizer.detokenize(served, req.getTokens()))).build()));
    }
}
