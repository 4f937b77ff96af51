package dev.ortserve.engine;

import ai.onnxruntime.OnnxTensor;

import java.util.List;

/**
 * The inputs of one forward pass of the decoder, built the same way for every kind of pass: each
 * row's new tokens fill {@code count} of the pass's {@code newLength} columns after a past of
 * {@code pastLength} positions holding the row's own past, both placed as the model's
 * {@link KvAlignment} says (left padding for Optimum exports, right padding for GroupQueryAttention
 * graphs); everything else is padding. A decode step is rows of one new token over the batch's
 * past; a prefill chunk is one row over its own past; a batched prefill is several rows over pasts
 * gathered for them (or none).
 *
 * @param pastKeys    per layer, [batch, kv_heads, pastLength, head_dim]; null for an empty past
 * @param lastColumns per row, the column whose logits give the row's next token
 * @param inPlace     the past tensors are also the present outputs: the graph (GroupQueryAttention)
 *                    writes the new columns into them in place, and the pass's mask spans the past
 *                    buffer ({@code pastLength + newLength} = the buffer's positions); see {@code batching.KvCache}
 * @param logitColumns how many of each row's columns, ending at its last one, the pass's logits are read for:
 *                    1, or the positions of a speculative verification (its drafted tokens and one more)
 * @param adapter     the LoRA adapter every row of the pass runs with (onnxruntime applies one set per run), or null
 * @param images      the image features its image tokens take, at their places in the pass ({@link ImageRows#NONE} for none)
 */
public record ForwardPass(int batch, int pastLength, int newLength, long[] ids, long[] mask, long[] positions,
                          OnnxTensor[] pastKeys, OnnxTensor[] pastValues, int[] lastColumns, boolean inPlace, int logitColumns,
                          LoraAdapter adapter, ImageRows images) {

    public ForwardPass(int batch, int pastLength, int newLength, long[] ids, long[] mask, long[] positions,
                       OnnxTensor[] pastKeys, OnnxTensor[] pastValues, int[] lastColumns, boolean inPlace, int logitColumns) {
        this(batch, pastLength, newLength, ids, mask, positions, pastKeys, pastValues, lastColumns, inPlace, logitColumns, null, ImageRows.NONE);
    }

    /**
     * Image features in a pass: {@code rows} are flat indices into the pass's {@code batch x newLength} token columns,
     * {@code features} their {@code rows.length x hidden} floats (the graph scatters them over those tokens' embeddings).
     */
    public record ImageRows(long[] rows, float[] features, int hidden) {
        public static final ImageRows NONE = new ImageRows(new long[0], new float[0], 0);
    }

    /** A pass whose present tensors are new outputs (the past is copied into them). */
    public ForwardPass(int batch, int pastLength, int newLength, long[] ids, long[] mask, long[] positions,
                       OnnxTensor[] pastKeys, OnnxTensor[] pastValues, int[] lastColumns) {
        this(batch, pastLength, newLength, ids, mask, positions, pastKeys, pastValues, lastColumns, false, 1);
    }

    /**
     * One row: {@code count} tokens of {@code tokens} from {@code from}, following {@code pastValid}
     * positions of past, at positions {@code pastValid ...}.
     */
    public record Row(int[] tokens, int from, int count, int pastValid, PromptImages images) {

        public Row(int[] tokens, int from, int count, int pastValid) {
            this(tokens, from, count, pastValid, null);
        }

        public static Row decode(int token, int pastValid) {
            return new Row(new int[] {token}, 0, 1, pastValid);
        }
    }

    public static ForwardPass of(KvAlignment alignment, List<Row> rows, int pastLength, OnnxTensor[] pastKeys, OnnxTensor[] pastValues) {
        int b = rows.size();
        int n = 0;
        for (Row r : rows) n = Math.max(n, r.count());
        int total = pastLength + n;
        long[] ids = new long[b * n], mask = new long[b * total], pos = new long[b * n];
        int[] last = new int[b];
        for (int r = 0; r < b; r++) {
            Row row = rows.get(r);
            if (row.pastValid() > pastLength) throw new IllegalArgumentException("a row's past is longer than the pass's");
            alignment.fill(row, r, pastLength, n, ids, mask, pos);
            last[r] = alignment.lastColumn(n, row.count());
        }
        return new ForwardPass(b, pastLength, n, ids, mask, pos, pastKeys, pastValues, last, false, 1, null, imageRows(alignment, rows, n));
    }

    /** The image features of the rows' tokens that are image tokens, placed at their columns. */
    private static ImageRows imageRows(KvAlignment alignment, List<Row> rows, int n) {
        int count = 0, hidden = 0;
        for (Row row : rows) {
            PromptImages images = row.images();
            if (images == null) continue;
            count += images.firstAtOrAfter(row.from() + row.count()) - images.firstAtOrAfter(row.from());
            hidden = images.hidden();
        }
        if (count == 0) return ImageRows.NONE;
        long[] at = new long[count];
        float[] features = new float[count * hidden];
        int k = 0;
        for (int r = 0; r < rows.size(); r++) {
            Row row = rows.get(r);
            PromptImages images = row.images();
            if (images == null) continue;
            int first = alignment.lastColumn(n, row.count()) - row.count() + 1;
            for (int i = images.firstAtOrAfter(row.from()); i < images.positions().length && images.positions()[i] < row.from() + row.count(); i++) {
                at[k] = (long) r * n + first + images.positions()[i] - row.from();
                System.arraycopy(images.features(), i * hidden, features, k * hidden, hidden);
                k++;
            }
        }
        return new ImageRows(at, features, hidden);
    }

    /** This pass with its past tensors bound as its present outputs too (written in place). */
    public ForwardPass withPresentInPast() {
        if (pastKeys == null) throw new IllegalStateException("an in-place pass needs a past buffer");
        return new ForwardPass(batch, pastLength, newLength, ids, mask, positions, pastKeys, pastValues, lastColumns, true, logitColumns, adapter, images);
    }

    /** This pass with logits read for the last {@code columns} columns of each row (speculative verification). */
    public ForwardPass withLogitColumns(int columns) {
        if (columns < 1 || columns > newLength) throw new IllegalArgumentException("logit columns must be 1 to the pass's new columns, not " + columns);
        return new ForwardPass(batch, pastLength, newLength, ids, mask, positions, pastKeys, pastValues, lastColumns, inPlace, columns, adapter, images);
    }

    /** This pass run with {@code lora} (null: the base model). */
    public ForwardPass withAdapter(LoraAdapter lora) {
        return new ForwardPass(batch, pastLength, newLength, ids, mask, positions, pastKeys, pastValues, lastColumns, inPlace, logitColumns, lora, images);
    }

    public int totalLength() {
        return pastLength + newLength;
    }
}
