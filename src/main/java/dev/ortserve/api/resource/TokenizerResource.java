package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.generated.TokenizerApi;
import dev.ortserve.api.model.DetokenizeRequest;
import dev.ortserve.api.model.DetokenizeResponse;
import dev.ortserve.api.model.TokenizeCompletionRequest;
import dev.ortserve.api.model.TokenizeResponse;
import dev.ortserve.api.union.TokenizeRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.service.GenerationModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

import java.util.ArrayList;
import java.util.List;

/** POST /tokenize and /detokenize, on the served model's own tokenizer (vLLM's utilities). */
public class TokenizerResource implements TokenizerApi {

    @Inject
    GenerationModelHost host;

    @Override
    public Uni<Response> tokenize(TokenizeRequest request) {
        if (!(request.value() instanceof TokenizeCompletionRequest req)) {
            throw ApiException.unsupported("messages", "Tokenizing chat 'messages' needs the chat template support that this build does not have yet; send 'prompt'.");
        }
        if (req.getModel() != null) host.requireModel(req.getModel());
        LoadedModel model = host.model();
        int[] ids = model.tokenizer().encode(req.getPrompt(), !Boolean.FALSE.equals(req.getAddSpecialTokens()));
        List<Integer> tokens = new ArrayList<>(ids.length);
        for (int id : ids) tokens.add(id);
        TokenizeResponse response = new TokenizeResponse().tokens(tokens).count(ids.length).maxModelLen(model.spec().maxModelLen());
        if (Boolean.TRUE.equals(req.getReturnTokenStrs())) {
            response.tokenStrs(tokens.stream().map(model.tokenizer()::tokenText).toList());
        }
        return Uni.createFrom().item(Response.ok(response).build());
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
