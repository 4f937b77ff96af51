package dev.ortserve.engine.speculative;

import java.util.Arrays;

/**
 * One sequence's source of draft tokens and how many to draft: a predicted output (OpenAI's
 * Predicted Outputs) followed where the output agrees with it, a draft model ({@link Source}), or
 * prompt lookup over the sequence's own tokens ({@link NgramLookup}), in that order of preference.
 * Every source is deterministic (the same tokens give the same draft), which is what lets the engine
 * verify by sampling as it would without a draft. The draft length adapts to what the sequence accepts: it grows
 * while whole drafts are accepted and shrinks to what was, and after a draft of one token is
 * rejected drafting pauses for a number of steps that doubles with every such miss, up to 64 (so text
 * that never repeats, or a draft model that never agrees, costs a few verification passes; a prediction
 * never pauses: it costs nothing once the output has left it). Engine thread.
 */
public final class Drafter implements AutoCloseable {

    /** Drafts from a model of its own (greedy: a deterministic draft); holds that model's state for one sequence. */
    public interface Source extends AutoCloseable {
        /** Up to {@code count} tokens after {@code tokens[0..length)}; empty when it cannot draft now. */
        int[] propose(int[] tokens, int length, int count);

        /** Lets go of what it holds for the sequence (it may draft again later, from nothing). */
        @Override
        void close();
    }

    private static final int MAX_PAUSE = 64;

    private final SpeculativeOptions options;
    /** The predicted output's tokens, or null: a draft model or prompt lookup. */
    private final int[] prediction;
    /** The draft model's state for this sequence, or null. */
    private final Source model;
    /** Where the output stands in the prediction: the index of the prediction token expected next; -1 when it left it. */
    private int aligned;
    /** Generated tokens read into {@link #aligned} so far. */
    private int followed;
    /** The last place the output stood in the prediction: a new alignment after it is preferred. */
    private int lastAligned;
    private int length;
    private int pause;
    private int misses;
    private long drafted;
    private long accepted;

    private Drafter(SpeculativeOptions options, int[] prediction, Source model) {
        this.options = options;
        this.prediction = prediction;
        this.model = model;
        this.length = options.numSpeculativeTokens();
    }

    /** Drafts from the prediction when there is one, else by prompt lookup when the options turn it on; null when neither. */
    public static Drafter of(SpeculativeOptions options, int[] prediction) {
        return of(options, prediction, () -> null);
    }

    /**
     * Drafts from the prediction when there is one, else from a draft model when {@code model} gives one, else by prompt
     * lookup when the options turn it on; null when none.
     */
    public static Drafter of(SpeculativeOptions options, int[] prediction, java.util.function.Supplier<Source> model) {
        if (options.numSpeculativeTokens() <= 0) return null;
        if (prediction != null && prediction.length > 0) return new Drafter(options, prediction, null);
        Source source = model.get();
        if (source != null) return new Drafter(options, null, source);
        return options.promptLookup() ? new Drafter(options, null, null) : null;
    }

    /** Lets go of the draft model's state (when there is one): the sequence ended, or does not draft for now. */
    @Override
    public void close() {
        if (model != null) model.close();
    }

    /** Whether the drafts come from a predicted output. */
    public boolean predicted() {
        return prediction != null;
    }

    /**
     * The draft for the token after {@code tokens[0..length)} (prompt and generated tokens, the
     * generated ones from {@code promptLength}): at most {@code limit} tokens, empty for none.
     */
    public int[] propose(int[] tokens, int promptLength, int length, int limit) {
        int k = Math.min(limit, this.length);
        if (prediction != null) {
            follow(tokens, promptLength, length);
            if (aligned < 0 || aligned >= prediction.length || k <= 0) return new int[0];
            return Arrays.copyOfRange(prediction, aligned, Math.min(prediction.length, aligned + k));
        }
        if (pause > 0) {
            pause--;
            return new int[0];
        }
        if (model != null) return k <= 0 ? new int[0] : model.propose(tokens, length, k);
        return NgramLookup.propose(tokens, length, options.promptLookupMin(), options.promptLookupMax(), k);
    }

    /** Reads the generated tokens not read yet: each one that is the prediction's next keeps the output aligned with it. */
    private void follow(int[] tokens, int promptLength, int length) {
        for (int i = promptLength + followed; i < length; i++, followed++) {
            if (aligned >= 0 && aligned < prediction.length && prediction[aligned] == tokens[i]) {
                lastAligned = ++aligned;
            } else {
                aligned = -1;
            }
        }
        if (aligned < 0 && length > promptLength) {
            // left the prediction: find the generated tail in it again (the output may skip or change a part and go on)
            aligned = NgramLookup.follow(prediction, tokens, promptLength, length, 1, options.promptLookupMax(), lastAligned);
        }
    }

    /** A verification checked {@code proposed} drafted tokens and accepted the first {@code taken}. */
    public void verified(int proposed, int taken) {
        drafted += proposed;
        accepted += taken;
        if (taken == proposed) {
            length = Math.min(options.numSpeculativeTokens(), Math.max(length, 1) * 2);
            misses = 0;
        } else {
            length = Math.max(1, taken + 1);
            if (taken == 0 && proposed == 1 && prediction == null) {
                misses++;
                pause = Math.min(MAX_PAUSE, 1 << Math.min(misses, 6));
            } else if (taken > 0) {
                misses = 0;
            }
        }
    }

    /** Drafted tokens verified so far. */
    public long drafted() {
        return drafted;
    }

    /** Drafted tokens accepted so far. */
    public long accepted() {
        return accepted;
    }
}
