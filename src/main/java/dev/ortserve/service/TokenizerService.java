package dev.ortserve.service;

import dev.ortserve.service.worker.OffIoThread;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;

/** Tokenizing and detokenizing on a served model's own tokenizer (vLLM's /tokenize and /detokenize). */
@ApplicationScoped
public class TokenizerService {

    /** A prompt's tokens, their texts when asked for (else null), and the model's context length. */
    public record Tokens(List<Integer> ids, List<String> strings, int maxModelLen) {
    }

    /**
     * A chat conversation's tokens: the same rendering path as chat completions, so what this counts is what the model is fed;
     * {@code images} the messages' images (refused on a model that takes text only, expanded to their tokens on one that reads them).
     */
    public Uni<Tokens> chat(ServedModel served, ChatPromptRenderer.Request request, java.util.List<ImageInput> images,
                            boolean strings) {
        ImageInput.requireImageModel(served, images);
        LoadedModel model = served.model();
        if (images.isEmpty()) return served.chatPrompts().renderOffIoThread(request).map(prompt -> tokens(prompt.tokenIds(), strings, model));
        // a vision model's images expanded to their tokens, as a chat turn runs them (read and preprocessed on a worker thread)
        return OffIoThread.run(() -> tokens(model.tokenizer().encode(served.vision().expandedText(served.chatPrompts().render(request).text(), images,
                "messages"), false), strings, model));
    }

    public Tokens text(ServedModel served, String text, boolean addSpecialTokens, boolean strings) {
        LoadedModel model = served.model();
        return tokens(model.tokenizer().encode(text, addSpecialTokens), strings, model);
    }

    /** The text of token ids; each must be in the vocabulary. */
    public String detokenize(ServedModel served, List<Integer> tokens) {
        LoadedModel model = served.model();
        int vocab = model.spec().vocabSize();
        int[] ids = new int[tokens.size()];
        for (int i = 0; i < ids.length; i++) {
            Integer id = tokens.get(i);
            if (id == null || id < 0 || id >= vocab) {
                throw new InvalidRequestException("tokens", "Token id " + id + " at index " + i + " is outside the vocabulary [0, " + vocab + ").");
            }
            ids[i] = id;
        }
        return model.tokenizer().decode(ids, false);
    }

    private static Tokens tokens(int[] ids, boolean strings, LoadedModel model) {
        List<Integer> list = new ArrayList<>(ids.length);
        for (int id : ids) list.add(id);
        return new Tokens(list, strings ? list.stream().map(model.tokenizer()::tokenText).toList() : null, model.spec().maxModelLen());
    }
}
