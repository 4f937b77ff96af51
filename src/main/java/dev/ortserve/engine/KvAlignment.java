package dev.ortserve.engine;

/**
 * Where a row's positions sit in the padded tensors of a batch: the one place that knows the
 * padding side a decoder needs. Every buffer of the engine with rows of different lengths (the
 * batch's KV, a pass's present tensors, a pending KV, a gathered past) holds each row's positions
 * as {@link #start} says, and every pass's inputs are laid out by {@link #fill}.
 * <ul>
 * <li>{@link #END}: Optimum / transformers.js exports (explicit attention over the mask, position
 * ids given): left padding. A row's past ends at the buffer's last position, its new tokens are
 * right-aligned in the pass's columns, the mask marks exactly the row's positions.</li>
 * <li>{@link #START}: onnxruntime-genai model-builder graphs with GroupQueryAttention. The op takes
 * no mask and no positions: it reads each row's length as the sum of its attention_mask row
 * ({@code seqlens_k = sum - 1}), expects the row's past in the first {@code sum - newLength}
 * positions of the past buffer, appends the pass's new columns there and numbers them from that
 * length on. So rows are right-padded: the past starts at position 0, the new tokens fill the first
 * columns, and the mask sums to past + all new columns (padding columns included: they land in the
 * KV after the row's real positions, where the next pass overwrites them, and causality keeps the
 * real tokens from seeing them).</li>
 * </ul>
 */
public enum KvAlignment {

    END {
        @Override
        public int start(int span, int length) {
            return span - length;
        }

        @Override
        int firstColumn(int newLength, int count) {
            return newLength - count;
        }

        @Override
        void mask(long[] mask, int offset, int pastLength, int newLength, int pastValid, int count) {
            for (int j = pastLength - pastValid; j < pastLength; j++) mask[offset + j] = 1;
            for (int i = newLength - count; i < newLength; i++) mask[offset + pastLength + i] = 1;
        }
    },

    START {
        @Override
        public int start(int span, int length) {
            return 0;
        }

        @Override
        int firstColumn(int newLength, int count) {
            return 0;
        }

        @Override
        void mask(long[] mask, int offset, int pastLength, int newLength, int pastValid, int count) {
            for (int j = 0; j < pastValid + newLength; j++) mask[offset + j] = 1;
        }
    };

    /** Index of the first of a row's {@code length} positions in a buffer of {@code span} positions. */
    public abstract int start(int span, int length);

    /** The pass column of a row's first new token ({@code count} of {@code newLength} columns). */
    abstract int firstColumn(int newLength, int count);

    /** The column whose logits are the row's next-token logits. */
    public int lastColumn(int newLength, int count) {
        return firstColumn(newLength, count) + count - 1;
    }

    /** One row's attention mask, [pastLength + newLength] from {@code offset}. */
    abstract void mask(long[] mask, int offset, int pastLength, int newLength, int pastValid, int count);

    /** One row of a pass: ids, positions and mask of {@code row} at index {@code r}. */
    public void fill(ForwardPass.Row row, int r, int pastLength, int newLength, long[] ids, long[] mask, long[] positions) {
        int first = firstColumn(newLength, row.count());
        for (int i = 0; i < row.count(); i++) {
            ids[r * newLength + first + i] = row.tokens()[row.from() + i];
            positions[r * newLength + first + i] = row.pastValid() + i;
        }
        mask(mask, r * (pastLength + newLength), pastLength, newLength, row.pastValid(), row.count());
    }
}
