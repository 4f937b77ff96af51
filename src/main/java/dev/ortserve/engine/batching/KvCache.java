package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.ForwardPass;

import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.kv.KvBlock;
import dev.ortserve.engine.kv.KvBuffers;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The batch's KV: per-layer past tensors [rows, kv_heads, length, head_dim], each row's
 * positions placed as the model's {@link KvAlignment} says (left padding for Optimum exports,
 * right padding for GroupQueryAttention graphs). While the batch's membership does not change, a decode
 * step's present tensors become the next past without a copy ({@link #adopt}); when rows leave or
 * join, the batch is repacked, one copy of the live rows into a new layout trimmed to the
 * longest. Repacking is also when computed KV enters the prefix cache: a joining sequence's
 * prompt, and a leaving sequence's prompt and generated tokens. Engine thread only.
 * <p>
 * In place ({@link EngineOptions#kvInPlace()}, {@link KvAlignment#START} graphs only): each layer's
 * key and value are one buffer of {@link #span} positions per row, more than the longest row holds
 * (rounded up to {@link #GROWTH}). A decode step binds each buffer as both the past input and the
 * present output of GroupQueryAttention, which then writes the new position of every row in place
 * (onnxruntime's past_present_share_buffer): nothing copies the past. When the longest row fills
 * its buffer, the batch is repacked into a longer one (one copy every {@link #GROWTH} steps).
 */
public final class KvCache implements AutoCloseable {

    private final DecoderSpec spec;
    private final OrtEnvironment env;
    /** Positions an in-place buffer grows by: its span is the longest row's length plus one, rounded up to this. */
    public static final int GROWTH = 256;

    private final PrefixCache prefix;
    private final java.util.function.ToLongFunction<List<Sequence>> room;
    private final boolean inPlace;
    private OnnxTensor[] keys;
    private OnnxTensor[] values;
    /**
     * The buffers behind {@link #keys} and {@link #values} when a repack made them (read without a copy when the batch is
     * repacked again, freed layer by layer); null when a decode step's outputs are the batch's KV ({@link #owner} frees them).
     */
    private KvBuffers own;
    private AutoCloseable owner;
    private int length;
    private int span;

    /** @param prefix the prefix cache, or null when it is off */
    KvCache(DecoderSpec spec, OrtEnvironment env, PrefixCache prefix) {
        this(spec, env, prefix, false);
    }

    /**
     * @param prefix  the prefix cache, or null when it is off
     * @param inPlace decode steps write into the batch's buffers (only for {@link KvAlignment#START}; ignored otherwise)
     */
    KvCache(DecoderSpec spec, OrtEnvironment env, PrefixCache prefix, boolean inPlace) {
        this(spec, env, prefix, inPlace, leaving -> Long.MAX_VALUE);
    }

    /**
     * @param room what the prefix cache may hold while a repack stores blocks, given the sequences leaving in it (their rows
     *             freed: {@link Scheduler#cacheRoom})
     */
    KvCache(DecoderSpec spec, OrtEnvironment env, PrefixCache prefix, boolean inPlace, java.util.function.ToLongFunction<List<Sequence>> room) {
        this.room = room;
        this.spec = spec;
        this.env = env;
        this.prefix = prefix;
        this.inPlace = inPlace && spec.alignment() == KvAlignment.START;
    }

    /** Decode steps bind the batch's buffers as past and present ({@link ForwardPass#withPresentInPast}). */
    boolean inPlace() {
        return inPlace;
    }

    /** Positions per row in the batch's tensors: {@link #length} when copying, more in place. */
    int span() {
        return span;
    }

    /** In place: whether the next decode step's position fits in the buffers (else repack first: they grow). */
    boolean hasRoomForStep() {
        return length + 1 <= span;
    }

    /** In place: a decode step wrote one position per row into the buffers. */
    void advance() {
        if (!inPlace) throw new IllegalStateException("the batch's KV is not written in place");
        length++;
    }

    /**
     * In place: room for the next step, rounded up to {@link #GROWTH}, but never more than the rows may come to hold
     * ({@code limit}: the largest prompt + max_tokens among them, what the scheduler reserves for each, so the buffers
     * stay within the KV budget: rounded up, 16 streams of 1,600 + 32 tokens held 1,792 positions a row, 70 MiB of fp32
     * KV past the budget at Qwen3-0.6B's shape) and past the context only when a row needs it (rotary caches end there).
     */
    int spanFor(int newLength, int limit) {
        if (!inPlace) return newLength;
        return roundedSpan(newLength, Math.min(limit, spec.maxModelLen()));
    }

    /**
     * In-place buffers for {@code length} positions and the next step: {@code length + 1} rounded up to {@link #GROWTH},
     * at most {@code cap} (unless the next step needs more). The batch's and a draft session's buffers grow alike.
     */
    static int roundedSpan(int length, int cap) {
        int rounded = (length + 1 + GROWTH - 1) / GROWTH * GROWTH;
        return Math.max(length + 1, Math.min(rounded, cap));
    }

    /** In place: rows of the batch ran passes of their own (speculative verification); the longest now holds {@code longest} positions. */
    void advanceTo(int longest) {
        if (!inPlace) throw new IllegalStateException("the batch's KV is not written in place");
        if (longest > span) throw new IllegalStateException("a row holds " + longest + " positions in buffers of " + span);
        length = Math.max(length, longest);
    }

    /**
     * In place: row {@code r}'s part of the batch's buffers as tensors of one row, [1, kv_heads, span, head_dim] per layer,
     * for a pass of that row alone that writes into them (no copy: each row is one contiguous part of its buffer).
     * The batch's own tensors when it has one row. Closing the view closes its tensors, not the buffers.
     */
    KvBuffers.View row(int r, int rows) throws OrtException {
        return rows(r, 1, rows);
    }

    /**
     * In place: rows {@code from} to {@code from + count - 1} of the batch's {@code rows} as tensors of a batch of
     * {@code count}, for a pass of those rows alone (a LoRA adapter's rows: the repack keeps each adapter's rows
     * together) that writes into them. The batch's own tensors when they are all its rows.
     */
    KvBuffers.View rows(int from, int count, int rows) throws OrtException {
        if (!inPlace) throw new IllegalStateException("the batch's KV is not written in place");
        if (own.rows() != rows) throw new IllegalStateException("a view of " + rows + " rows of a batch of " + own.rows());
        return own.rows(from, count);
    }

    PrefixCache prefix() {
        return prefix;
    }

    /** Padded length of the batch's rows. */
    int length() {
        return length;
    }

    OnnxTensor[] keys() {
        return keys;
    }

    OnnxTensor[] values() {
        return values;
    }

    /** A decode step's present tensors become the past (no copy); the step's outputs are owned here now. */
    void adopt(DecoderRunner.Forward forward, int newLength) {
        OnnxTensor[] k = new OnnxTensor[spec.layers()], v = new OnnxTensor[spec.layers()];
        for (int l = 0; l < spec.layers(); l++) {
            k[l] = forward.presentKey(l);
            v[l] = forward.presentValue(l);
        }
        release();
        keys = k;
        values = v;
        owner = forward;
        length = newLength;
        span = newLength;
    }

    /**
     * Rebuilds the batch from the rows that go on and the joining sequences (each with its pending
     * KV), padded to the longest. Rows and joiners that are done are dropped, their KV
     * offered to the prefix cache first and then released. Returns the new rows.
     */
    List<Sequence> repack(List<Sequence> rows, List<Sequence> joining) throws OrtException {
        List<Sequence> keep = new ArrayList<>(rows.size());
        List<Integer> keepIndex = new ArrayList<>();
        List<Sequence> leaving = new ArrayList<>();
        for (int r = 0; r < rows.size(); r++) {
            Sequence s = rows.get(r);
            if (s.done()) {
                leaving.add(s);
            } else {
                keep.add(s);
                keepIndex.add(r);
            }
        }
        // done() is read once per sequence: a client may cancel while this runs
        List<Sequence> joiners = new ArrayList<>(), joinDone = new ArrayList<>();
        for (Sequence s : joining) (s.done() ? joinDone : joiners).add(s);
        List<Sequence> next = new ArrayList<>(keep);
        next.addAll(joiners);
        // each LoRA adapter's rows together (the base model's first), in their order otherwise: a decode step runs
        // each adapter's rows as one pass over a contiguous part of the buffers
        next.sort(java.util.Comparator.comparingInt(Sequence::adapterKey));
        Map<Sequence, Integer> at = new IdentityHashMap<>();
        for (int i = 0; i < next.size(); i++) at.put(next.get(i), i);
        int newLength = 0, limit = 0;
        for (Sequence s : next) {
            newLength = Math.max(newLength, s.length);
            limit = Math.max(limit, s.maxPositions());
        }
        int newSpan = spanFor(newLength, limit);

        // what enters the prefix cache: every joiner's prompt, every leaving row's tokens
        Map<Sequence, PrefixCache.Insertion> inserting = new IdentityHashMap<>();
        if (prefix != null) {
            // leavers first: each one's row is freed as its blocks are stored, so its row is room for them
            List<Sequence> freed = new ArrayList<>();
            for (Sequence s : leaving) {
                freed.add(s);
                offer(s, inserting, freed);
            }
            for (Sequence s : joining) offer(s, inserting, freed);
        }
        boolean readBatch = !keep.isEmpty() || leaving.stream().anyMatch(inserting::containsKey);
        KvBuffers made = next.isEmpty() ? null : KvBuffers.empty(env, spec, next.size(), newSpan);
        try {
            for (int l = 0; l < spec.layers(); l++) {
                for (int kind = 0; kind < 2; kind++) {
                    ByteBuffer dst = made == null ? null : made.allocate(l, kind);
                    if (readBatch) {
                        Buffer src = own != null ? own.view(l, kind) : KvBlock.read(kind == 0 ? keys[l] : values[l], spec);
                        for (int i = 0; i < keep.size(); i++) {
                            KvBlock.moveRow(spec, src, keepIndex.get(i), span, dst, at.get(keep.get(i)), newSpan, keep.get(i).length);
                        }
                        for (Sequence s : leaving) {
                            PrefixCache.Insertion ins = inserting.get(s);
                            if (ins != null) ins.fill(l, kind, src, rows.indexOf(s), span, s.length);
                        }
                    }
                    Map<OnnxTensor, Buffer> read = new IdentityHashMap<>(); // sequences prefilled together share one tensor
                    for (Sequence s : joining) {
                        PendingKv p = s.pending;
                        PrefixCache.Insertion ins = inserting.get(s);
                        boolean joins = joiners.contains(s);
                        if (!joins && ins == null) continue;
                        final int layer = l, k = kind;
                        Buffer src = read.computeIfAbsent(kind == 0 ? p.keys[l] : p.values[l], t -> p.read(layer, k));
                        if (ins != null) ins.fill(l, kind, src, p.row, p.span, s.length);
                        if (joins) KvBlock.moveRow(spec, src, p.row, p.span, dst, at.get(s), newSpan, s.length);
                    }
                }
                // this layer of the old batch has been read: freed now, so the two layouts coexist one layer at a time,
                // not whole (a batch that fails past here is failed whole by the engine, as any failed repack is); so is
                // this layer of every joining sequence's own buffers (its prefill wrote there in place)
                if (own != null) own.releaseLayer(l);
                for (Sequence s : joining) if (s.pending != null) s.pending.releaseLayer(l);
            }
        } catch (OrtException | RuntimeException | OutOfMemoryError e) {
            if (made != null) made.close();
            inserting.values().forEach(PrefixCache.Insertion::abandon);
            throw e;
        }
        inserting.values().forEach(PrefixCache.Insertion::commit);
        release();
        if (made != null) {
            own = made; // freed layer by layer, when let go (not when a collection finds them)
            keys = made.keys();
            values = made.values();
        }
        length = next.isEmpty() ? 0 : newLength;
        span = next.isEmpty() ? 0 : newSpan;
        for (Sequence s : leaving) s.retire();
        joinDone.forEach(Sequence::retire);
        joiners.forEach(Sequence::closePending);
        return next;
    }

    private void offer(Sequence s, Map<Sequence, PrefixCache.Insertion> inserting, List<Sequence> leavingRows) {
        if (s.hold == null) return;
        PrefixCache.Insertion ins = prefix.insert(s.hold, s.tokens(s.length), room.applyAsLong(leavingRows));
        if (!ins.isEmpty()) inserting.put(s, ins);
    }

    /** Frees the batch's tensors; the batch is empty afterwards. */
    void release() {
        if (own != null) {
            own.close();
            own = null;
        }
        if (owner != null) {
            try {
                owner.close();
            } catch (Exception ignored) {
                // nothing left to free
            }
        }
        owner = null;
        keys = null;
        values = null;
        length = 0;
        span = 0;
    }

    /** Frees the batch's tensors and the prefix cache's blocks (the engine has stopped: nothing references them). */
    @Override
    public void close() {
        release();
        if (prefix != null) prefix.evict(Long.MAX_VALUE);
    }
}
