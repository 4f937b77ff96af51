package dev.ortserve.engine;

import ai.onnxruntime.OnnxTensor;

import java.util.List;

/**
 * The inputs of one forward pass of the decoder, built the same way for every kind of pass: each
 * row's new tokens are right-aligned in {@code newLength} columns after a past of
 * {@code pastLength} positions in which the row's own past is right-aligned; everything else is
 * padding, masked with 0. A decode step is rows of one new token over the batch's past; a prefill
 * chunk is one row over its own past; a batched prefill is several rows over an empty past.
 *
 * @param pastKeys per layer, [batch, kv_heads, pastLength, head_dim]; null for an empty past
 */
public record ForwardPass(int batch, int pastLength, int newLength, long[] ids, long[] mask, long[] positions,
                          OnnxTensor[] pastKeys, OnnxTensor[] pastValues) {

    /**
     * One row: {@code count} tokens of {@code tokens} from {@code from}, following {@code pastValid}
     * positions of past (the last ones of the pass's past), at positions {@code pastValid ...}.
     */
    public record Row(int[] tokens, int from, int count, int pastValid) {
        public static Row decode(int token, int pastValid) {
            return new Row(new int[] {token}, 0, 1, pastValid);
        }
    }

    public static ForwardPass of(List<Row> rows, int pastLength, OnnxTensor[] pastKeys, OnnxTensor[] pastValues) {
        int b = rows.size();
        int n = 0;
        for (Row r : rows) n = Math.max(n, r.count());
        int total = pastLength + n;
        long[] ids = new long[b * n], mask = new long[b * total], pos = new long[b * n];
        for (int r = 0; r < b; r++) {
            Row row = rows.get(r);
            if (row.pastValid() > pastLength) throw new IllegalArgumentException("a row's past is longer than the pass's");
            for (int j = pastLength - row.pastValid(); j < pastLength; j++) mask[r * total + j] = 1;
            int pad = n - row.count();
            for (int i = 0; i < row.count(); i++) {
                ids[r * n + pad + i] = row.tokens()[row.from() + i];
                pos[r * n + pad + i] = row.pastValid() + i;
                mask[r * total + pastLength + pad + i] = 1;
            }
        }
        return new ForwardPass(b, pastLength, n, ids, mask, pos, pastKeys, pastValues);
    }

    public int totalLength() {
        return pastLength + newLength;
    }
}
