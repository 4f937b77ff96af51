package dev.ortserve.engine.speculative;

/**
 * Speculative decoding, named like vLLM's settings.
 *
 * @param numSpeculativeTokens the most tokens drafted for one verification pass (the draft length adapts below it); 0 turns
 *                             speculation off, predicted outputs included
 * @param promptLookup         draft by prompt lookup ({@link NgramLookup}) when a request has no predicted output
 * @param promptLookupMin      the shortest tail looked up
 * @param promptLookupMax      the longest tail looked up
 * @param maxBatch             speculate only while the batch has at most this many running rows: each row is then verified in a
 *                             pass of its own (onnxruntime's CPU GroupQueryAttention takes one row when a pass feeds several tokens
 *                             over a past), which costs more than one batched decode step once the batch is larger
 */
public record SpeculativeOptions(int numSpeculativeTokens, boolean promptLookup, int promptLookupMin, int promptLookupMax, int maxBatch) {

    public static final SpeculativeOptions DEFAULT = new SpeculativeOptions(8, true, 2, 4, 1);
    public static final SpeculativeOptions OFF = new SpeculativeOptions(0, false, 2, 4, 1);

    public SpeculativeOptions {
        if (numSpeculativeTokens < 0) throw new IllegalArgumentException("num-speculative-tokens must be 0 or more, not " + numSpeculativeTokens);
        if (promptLookupMin < 1 || promptLookupMax < promptLookupMin) {
            throw new IllegalArgumentException("prompt-lookup-min must be at least 1 and at most prompt-lookup-max, not "
                    + promptLookupMin + " and " + promptLookupMax);
        }
        if (maxBatch < 1) throw new IllegalArgumentException("speculative max-batch must be at least 1, not " + maxBatch);
    }

    public boolean enabled() {
        return numSpeculativeTokens > 0;
    }
}
