package dev.ortserve.engine;

/** Whether a loaded model can draft for another (speculative decoding with a draft model). */
public final class DraftCheck {

    private DraftCheck() {
    }

    /**
     * Whether {@code draft} can draft for {@code model}: the same tokenizer (the same vocabulary size and the same ids for a
     * probe text), KV written in place (GroupQueryAttention), no more logits; null when it can, else why not (naming both).
     */
    public static String check(LoadedModel model, LoadedModel draft) {
        String probe = "Speculative decoding: def f(x):\n    return {\"a\": [1, 2.5e3]} # ünïcödé 漢字 🙂";
        int a = model.tokenizer().vocabSize(), b = draft.tokenizer().vocabSize();
        if (a != b) return "the draft model " + draft.directory() + " has a vocabulary of " + b + " tokens, the served model " + model.directory() + " " + a;
        if (!java.util.Arrays.equals(model.tokenizer().encode(probe), draft.tokenizer().encode(probe))) {
            return "the draft model " + draft.directory() + " tokenizes text differently from the served model " + model.directory();
        }
        if (draft.spec().alignment() != KvAlignment.START) {
            return "the draft model " + draft.directory() + " does not run GroupQueryAttention (its attention was not rewritten on load):"
                    + " a draft keeps its KV in place, as the served model " + model.directory() + " does";
        }
        if (draft.spec().vocabSize() > model.spec().vocabSize()) {
            return "the draft model " + draft.directory() + " has " + draft.spec().vocabSize() + " logits, more than the served model's "
                    + model.spec().vocabSize();
        }
        return null;
    }
}
