package dev.ortserve.engine.kv;

import dev.ortserve.engine.KvAlignment;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.memory.NativeBuffers;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Automatic prefix caching (as vLLM does it): the KV of computed tokens kept in blocks of
 * {@link #BLOCK} tokens, each keyed by its tokens and its parent block, so a key names a whole
 * prefix (a chained hash; equality is exact, so a hash collision can never hand out another
 * prefix's KV). A new sequence reuses the longest cached prefix and prefills only the rest.
 * <p>
 * Blocks live in host memory (direct buffers: [layer][key, value][kv_heads][BLOCK][head_dim]),
 * bounded by bytes ({@link #capBytes()}); least recently used blocks that no sequence references
 * go first, blocks in use never. A prefix's blocks are touched deepest first (on lookup, and when
 * a sequence lets go of them), so a chain is evicted from its tail.
 * <p>
 * The cache lives inside the engine's KV budget (as vLLM's block pool: cached blocks are free-able
 * memory of the same pool), every block counted ({@link #bytes()}): a block a running sequence
 * references is a second copy of positions its batch row holds, so it counts beside the sequence's
 * reservation ({@link #referencedBytes()}); only unreferenced blocks ({@link #unreferencedBytes()}) can be
 * evicted ({@link #evict}) when a waiting request needs the room, and storing takes only the room it is
 * given ({@link #insert(Hold, int[], long)}). The scheduler keeps reservations + bytes within the budget
 * (see {@code Scheduler}).
 * Engine thread only, except the statistics.
 */
public final class PrefixCache {

    static final int BLOCK = 16;

    private final DecoderSpec spec;
    private final OrtEnvironment env;
    private final long capBytes;
    private final int blockBytes;
    private final Map<Key, Block> blocks = new LinkedHashMap<>(64, 0.75f, true);
    /** Blocks allocated in this step whose KV is still being copied in. */
    private final Map<Key, Block> unpublished = new java.util.HashMap<>();
    private long nextId = 1;
    private final AtomicLong bytes = new AtomicLong();
    /** Bytes of the published blocks no sequence references: what counts against the KV budget on its own, what may be evicted. */
    private final AtomicLong unreferenced = new AtomicLong();
    private final AtomicLong evicted = new AtomicLong();
    private final AtomicLong count = new AtomicLong();
    private final AtomicLong lookups = new AtomicLong();
    private final AtomicLong promptTokens = new AtomicLong();
    private final AtomicLong hitTokens = new AtomicLong();
    private volatile long references; // written on the engine thread only

    /** @param capBytes the most the cache may hold, referenced blocks included (at most the KV budget: see the class comment) */
    public PrefixCache(DecoderSpec spec, OrtEnvironment env, long capBytes) {
        this.spec = spec;
        this.env = env;
        this.capBytes = capBytes;
        this.blockBytes = 2 * spec.layers() * spec.kvHeads() * BLOCK * spec.headDim() * spec.kvElementBytes();
    }

    /** KV bytes of one token of this model (every layer, keys and values). */
    public static long bytesPerToken(DecoderSpec spec) {
        return spec.kvBytesPerToken();
    }

    private record Key(long parent, int[] tokens, int hash) {
        static Key of(long parent, int[] source, int from) {
            int[] t = Arrays.copyOfRange(source, from, from + BLOCK);
            return new Key(parent, t, 31 * Long.hashCode(parent) + Arrays.hashCode(t));
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.parent == parent && Arrays.equals(k.tokens, tokens);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    private static final class Block {
        final long id;
        final Key key;
        /**
         * Per layer, its keys then its values [2, kv_heads, BLOCK, head_dim], allocated as the layer is filled (a repack
         * fills layer by layer while it frees the old layout's: the two never coexist whole); null until then.
         */
        final ByteBuffer[] data;
        int refs;
        /** In {@link #blocks} (committed); until then only its writer's step can reach it. */
        boolean published;
        /** Evicted or abandoned: its bytes are no longer counted. */
        boolean gone;

        Block(long id, Key key, int layers) {
            this.id = id;
            this.key = key;
            this.data = new ByteBuffer[layers];
        }

        void free() {
            for (int l = 0; l < data.length; l++) {
                NativeBuffers.free(data[l]);
                data[l] = null;
            }
        }
    }

    /** The blocks one sequence references, in prefix order. */
    public final class Hold {
        private final List<Block> held = new ArrayList<>();
        /** The chain's root: 0 for the base model, a LoRA adapter's own (negative) key for its sequences. */
        private final long root;
        private boolean released;

        private Hold(long root) {
            this.root = root;
        }

        int blocks() {
            return held.size();
        }

        private long lastId() {
            return held.isEmpty() ? root : held.get(held.size() - 1).id;
        }

        private void add(Block b) {
            if (b.refs++ == 0 && b.published && !b.gone) unreferenced.addAndGet(-blockBytes);
            references++;
            held.add(b);
        }

        /**
         * Lets go of the blocks; those no other sequence references become unreferenced (free-able). Touched deepest first, so the root stays newest
         * and a chain is evicted from its tail (as vLLM frees a sequence's blocks in reverse).
         */
        public void release() {
            if (released) return;
            released = true;
            for (int i = held.size() - 1; i >= 0; i--) {
                Block b = held.get(i);
                references--;
                if (--b.refs == 0 && b.published && !b.gone) unreferenced.addAndGet(blockBytes);
                if (b.published && !b.gone) blocks.get(b.key);
            }
            held.clear();
        }
    }

    /**
     * Finds the longest cached prefix of {@code prompt} and references its blocks. At most
     * {@code prompt.length - 1} tokens are reused: the last prompt token must run to give logits.
     */
    public Hold lookup(int[] prompt) {
        return lookup(prompt, 0);
    }

    /**
     * The same for a sequence run with a LoRA adapter: {@code adapterKey} (its {@code LoraAdapter.key()}; 0 for the base
     * model) roots the chain, so the adapter's KV and the base model's, which differ for the same tokens, never mix.
     */
    public Hold lookup(int[] prompt, int adapterKey) {
        return lookupFrom(prompt, root(adapterKey));
    }

    /** The chain root of the base model's (0) or a LoRA adapter's prompts. */
    public static long root(int adapterKey) {
        return -(long) adapterKey;
    }

    /**
     * {@link #lookup(int[], int)} from the chain {@code root}: {@link #root(int)}, or another for prompts whose equal token
     * ids do not mean equal KV (a vision-language prompt's image tokens: {@code PromptImages.prefixRoot}).
     */
    public Hold lookupFrom(int[] prompt, long root) {
        Hold hold = new Hold(root);
        for (int j = 0; (j + 1) * BLOCK <= prompt.length; j++) {
            Block b = blocks.get(Key.of(hold.lastId(), prompt, j * BLOCK));
            if (b == null) break;
            hold.add(b);
        }
        for (int i = hold.held.size() - 1; i >= 0; i--) blocks.get(hold.held.get(i).key); // deepest first: the root stays newest
        lookups.incrementAndGet();
        promptTokens.addAndGet(prompt.length);
        hitTokens.addAndGet(reusable(hold, prompt.length));
        return hold;
    }

    /**
     * Bytes of the cached blocks {@link #lookup} would reference for {@code prompt} that no sequence references now:
     * what its lookup would add to the referenced bytes. No statistics; the blocks read become the most recent, as
     * for a lookup (the waiting request that asks is about to reuse them).
     */
    public long wouldReference(int[] prompt) {
        return wouldReference(prompt, 0);
    }

    /** {@link #wouldReference(int[])} for a sequence of the LoRA adapter {@code adapterKey} (0: the base model). */
    public long wouldReference(int[] prompt, int adapterKey) {
        return wouldReferenceFrom(prompt, root(adapterKey));
    }

    /** {@link #wouldReference(int[], int)} from the chain {@code root} ({@link #lookupFrom}). */
    public long wouldReferenceFrom(int[] prompt, long root) {
        long bytes = 0, parent = root;
        for (int j = 0; (j + 1) * BLOCK <= prompt.length; j++) {
            Block b = blocks.get(Key.of(parent, prompt, j * BLOCK));
            if (b == null) break;
            if (b.refs == 0) bytes += blockBytes;
            parent = b.id;
        }
        return bytes;
    }

    /** Bytes of the cached blocks running sequences reference (copies of positions their batch rows hold too). */
    public long referencedBytes() {
        return bytes.get() - unreferenced.get();
    }

    /** Tokens of the held prefix a prompt of {@code promptLength} tokens may reuse. */
    public static int reusable(Hold hold, int promptLength) {
        return Math.min(hold.blocks() * BLOCK, promptLength - 1);
    }

    /**
     * The first {@code tokens} positions of the held prefix as a sequence's pending KV
     * ([1, kv_heads, tokens, head_dim] per layer, owned by the returned value).
     */
    public PendingKv assemble(Hold hold, int tokens) throws OrtException {
        return assemble(hold, tokens, tokens);
    }

    /**
     * The first {@code tokens} positions of the held prefix at the start of a sequence's own buffers of {@code span}
     * positions ({@link PendingKv#allocate}), which its prefill chunks then write on in place.
     */
    public PendingKv assemble(Hold hold, int tokens, int span) throws OrtException {
        if (span < tokens) throw new IllegalArgumentException("a span of " + span + " cannot hold " + tokens + " positions");
        int layers = spec.layers(), kv = spec.kvHeads(), d = spec.headDim(), e = spec.kvElementBytes();
        PendingKv pending = PendingKv.allocate(env, spec, span);
        try {
            for (int l = 0; l < layers; l++) {
                for (int kind = 0; kind < 2; kind++) {
                    ByteBuffer dst = pending.data(l, kind);
                    for (int j = 0; j * BLOCK < tokens; j++) {
                        int n = Math.min(BLOCK, tokens - j * BLOCK);
                        ByteBuffer src = hold.held.get(j).data[l];
                        for (int h = 0; h < kv; h++) {
                            int from = offset(kind, h, 0) * e;
                            int to = (h * span + j * BLOCK) * d * e;
                            dst.put(to, src, from, n * d * e);
                        }
                    }
                }
            }
        } catch (RuntimeException | OutOfMemoryError ex) {
            pending.close();
            throw ex;
        }
        return pending;
    }

    /** Element offset of (key/value, head, position) in a block's layer. */
    private int offset(int kind, int head, int position) {
        return ((kind * spec.kvHeads() + head) * BLOCK + position) * spec.headDim();
    }

    /**
     * Starts keeping the full blocks of {@code tokens} beyond those already held: blocks already
     * cached (or being written by another sequence in the same step) are referenced, new ones
     * allocated (evicting unreferenced ones if needed; when the cap is all in use, the prefix
     * stops there). A new block is referenced by {@code hold}, so it is KV of that running sequence
     * (inside its reservation): storing never adds to what counts against the KV budget until the
     * sequence lets go of it, and then its reservation, which covered it, is given back. The new
     * blocks are filled layer by layer from the sequence's KV ({@link Insertion#fill}) and
     * published by {@link Insertion#commit}.
     */
    public Insertion insert(Hold hold, int[] tokens) {
        return insert(hold, tokens, Long.MAX_VALUE);
    }

    /**
     * The same, keeping the cache within {@code room} bytes as well as its cap: the KV budget the running sequences'
     * reservations leave (a stored block is a second copy of positions a batch row holds, so it takes room of its own).
     */
    public Insertion insert(Hold hold, int[] tokens, long room) {
        Insertion ins = new Insertion();
        for (int j = hold.blocks(); (j + 1) * BLOCK <= tokens.length; j++) {
            Key key = Key.of(hold.lastId(), tokens, j * BLOCK);
            Block existing = blocks.get(key);
            if (existing == null) existing = unpublished.get(key);
            if (existing != null) {
                hold.add(existing);
                continue;
            }
            if (!makeRoom(room)) break;
            Block b = new Block(nextId++, key, spec.layers());
            bytes.addAndGet(blockBytes); // counted as soon as taken (its layers are allocated as they are filled), so the next makeRoom sees it
            unpublished.put(key, b);
            hold.add(b);
            ins.fresh.add(b);
            ins.firstPosition.add(j * BLOCK);
        }
        return ins;
    }

    private boolean makeRoom(long room) {
        long limit = Math.min(capBytes, room);
        long over = bytes.get() + blockBytes - limit;
        if (over > 0) evict(over);
        return bytes.get() + blockBytes <= limit;
    }

    /**
     * Evicts least recently used unreferenced blocks until at least {@code atLeast} bytes are
     * freed or none is left; blocks a sequence references are never touched. Returns the bytes freed.
     */
    public long evict(long atLeast) {
        long freed = 0;
        Iterator<Block> it = blocks.values().iterator();
        while (freed < atLeast && it.hasNext()) {
            Block b = it.next();
            if (b.refs == 0) {
                it.remove();
                b.gone = true;
                bytes.addAndGet(-blockBytes);
                unreferenced.addAndGet(-blockBytes);
                count.decrementAndGet();
                evicted.incrementAndGet();
                freed += blockBytes;
                b.free(); // unreferenced: no sequence reads it, nothing copies into it
            }
        }
        return freed;
    }

    /** New blocks being filled from one sequence's KV (already referenced by its hold). */
    public final class Insertion {
        private final List<Block> fresh = new ArrayList<>();
        private final List<Integer> firstPosition = new ArrayList<>();

        public boolean isEmpty() {
            return fresh.isEmpty();
        }

        /**
         * Copies the new blocks' positions of one layer's keys ({@code kind} 0) or values (1) from
         * row {@code row} of a [*, kv_heads, span, head_dim] buffer holding the sequence's
         * {@code length} positions placed as the model's {@link KvAlignment} says.
         */
        public void fill(int layer, int kind, Buffer src, int row, int span, int length) {
            int kv = spec.kvHeads(), d = spec.headDim();
            for (int i = 0; i < fresh.size(); i++) {
                Block b = fresh.get(i);
                if (b.data[layer] == null) b.data[layer] = NativeBuffers.allocate(blockBytes / spec.layers());
                int start = spec.alignment().start(span, length) + firstPosition.get(i);
                for (int h = 0; h < kv; h++) {
                    int from = ((row * kv + h) * span + start) * d;
                    int to = offset(kind, h, 0);
                    if (src instanceof FloatBuffer f) {
                        b.data[layer].asFloatBuffer().put(to, f, from, BLOCK * d);
                    } else {
                        b.data[layer].asShortBuffer().put(to, (ShortBuffer) src, from, BLOCK * d);
                    }
                }
            }
        }

        /** Publishes the filled blocks: later sequences may reuse them. */
        public void commit() {
            for (Block b : fresh) {
                unpublished.remove(b.key);
                blocks.put(b.key, b);
                b.published = true; // referenced by its writer's hold: not unreferenced yet
                count.incrementAndGet();
            }
            fresh.clear();
        }

        /** Drops the unfilled blocks (the step failed); the holds referencing them let go as usual. */
        public void abandon() {
            for (Block b : fresh) {
                unpublished.remove(b.key);
                b.gone = true;
                b.free(); // never published: only the failed step's holds name it, and they are let go unread
            }
            bytes.addAndGet(-(long) blockBytes * fresh.size());
            fresh.clear();
        }
    }

    public long bytes() {
        return bytes.get();
    }

    public long blocks() {
        return count.get();
    }

    /** The most the cache may hold (referenced blocks included). */
    public long capBytes() {
        return capBytes;
    }

    /** Bytes of cached blocks no running sequence references: free-able, counted against the KV budget on their own. */
    public long unreferencedBytes() {
        return unreferenced.get();
    }

    /** Blocks evicted so far (for the cap or for the KV budget). */
    public long evictions() {
        return evicted.get();
    }

    public long lookups() {
        return lookups.get();
    }

    public long promptTokens() {
        return promptTokens.get();
    }

    public long hitTokens() {
        return hitTokens.get();
    }

    /** References held by sequences on cached blocks (zero when nothing runs). */
    public long references() {
        return references;
    }
}
