package dev.ortserve.engine.memory;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One memory budget for the process, split once at start (after the model is loaded, so that what it
 * holds is measured, not guessed):
 * <ul>
 * <li><b>limit</b>: {@code ORTSERVE_MEMORY_LIMIT}, else the cgroup's memory limit (a container's), else the
 * host's available memory plus what this process already holds;</li>
 * <li><b>resident at ready</b>: the process's resident set once the model is loaded (mapped and prepacked
 * weights, onnxruntime, the JVM's committed heap, metaspace and native libraries), measured;</li>
 * <li><b>heap growth</b>: what the JVM heap may still take beyond its committed part, up to its maximum
 * ({@code -Xmx}; without it the JVM takes a quarter of the machine);</li>
 * <li><b>onnxruntime working memory</b>: the intermediates of the largest pass the engine runs (bounded by the
 * prefill chunk and the batch; onnxruntime's arena keeps its peak), estimated by the caller as a fixed part and a
 * part per position of the longest sequence ({@link Working}): the context, or as many positions as the KV budget
 * holds when it holds fewer (no sequence is longer than its KV);</li>
 * <li><b>overhead</b>: a stated {@link #OVERHEAD} for what grows besides (threads' stacks, connections' buffers,
 * the tokenizer's and the JIT's native memory);</li>
 * <li><b>KV</b>: what is left, at most what the engine can use (max-sequences rows of the whole context),
 * or {@code ORTSERVE_ENGINE_KV_CACHE_BYTES} when set (capped, with a warning, when it does not fit the rest).</li>
 * </ul>
 * The KV lives in direct buffers: a batch that grows or changes rows is copied into a new layout while the
 * old one is still read, so direct memory must hold twice the KV budget. A budget larger than half of
 * {@code -XX:MaxDirectMemorySize} (whose default is the heap's maximum) is capped to it, with a warning that names both.
 *
 * @param others   what other models loaded beside this one set aside (their KV budgets and working memory; 0 for one model)
 * @param warnings what was capped, and why (to be logged at WARN)
 */
public record MemoryBudget(long limit, String limitSource, long resident, long heapGrowth, long working, long overhead,
                           long kv, String kvSource, long maxDirect, long others, List<String> warnings) {

    /** What is set aside for memory that grows outside the other parts. */
    public static final long OVERHEAD = 256L << 20;

    /**
     * What the caller knows about the model and the settings.
     *
     * @param configuredLimit ORTSERVE_MEMORY_LIMIT in bytes, or 0 when not set
     * @param configuredKv    ORTSERVE_ENGINE_KV_CACHE_BYTES, or negative when not set
     * @param kvUsable        the most KV the engine can hold (max-sequences rows of the whole context)
     * @param kvMinimum       the least KV worth serving with (one sequence of a useful length): a limit that leaves less
     *                        is a start error (a smaller configured KV budget is taken as it is)
     * @param working         onnxruntime's working memory for the largest pass
     */
    public record Request(long configuredLimit, long configuredKv, long kvUsable, long kvMinimum, Working working, long otherKv, long otherWorking) {

        /** One model in the process. */
        public Request(long configuredLimit, long configuredKv, long kvUsable, long kvMinimum, Working working) {
            this(configuredLimit, configuredKv, kvUsable, kvMinimum, working, 0, 0);
        }

        /** One model in the process, its working memory the same at any length. */
        public Request(long configuredLimit, long configuredKv, long kvUsable, long kvMinimum, long working) {
            this(configuredLimit, configuredKv, kvUsable, kvMinimum, Working.constant(working));
        }

        /**
         * The same request beside other models already loaded: their KV budgets and working memory are set aside
         * (not yet resident, they may grow into it), and their KV shares direct memory with this one's.
         */
        public Request besides(long otherKv, long otherWorking) {
            return new Request(configuredLimit, configuredKv, kvUsable, kvMinimum, working, otherKv, otherWorking);
        }
    }

    /**
     * onnxruntime's working memory: {@code fixed} bytes plus {@code perPosition} bytes for each position of the longest
     * sequence (a prefill chunk's attention scores at its end), which is the context, or fewer when the KV budget
     * holds fewer positions ({@code kvPerToken} bytes each).
     */
    public record Working(long fixed, long perPosition, int context, long kvPerToken) {

        public static Working constant(long bytes) {
            return new Working(bytes, 0, 0, 1);
        }

        /** At the whole context. */
        public long atMost() {
            return fixed + perPosition * context;
        }

        /** Beside a KV budget of {@code kv} bytes: the longest sequence is as long as the context or as that KV. */
        public long beside(long kv) {
            return fixed + perPosition * Math.min(context, kv / kvPerToken);
        }

        /** The most KV that fits {@code room} together with the working memory it allows (0 if none). */
        long kvWithin(long room) {
            long wholeContext = room - atMost();
            if (wholeContext >= (long) context * kvPerToken) return wholeContext;
            // kv + perPosition * kv / kvPerToken <= room - fixed
            return Math.max(0, (long) ((room - fixed) * ((double) kvPerToken / (kvPerToken + perPosition))));
        }
    }

    /** Thrown when the limit cannot hold the model and the least KV: names every part. */
    public static final class DoesNotFitException extends RuntimeException {
        public DoesNotFitException(String message) {
            super(message);
        }
    }

    /**
     * What the limit leaves now for another model's weights: the limit less the resident set, the heap's growth, the
     * overhead and what the loaded models set aside ({@code reserved}: their KV budgets and working memory).
     */
    public static long headroom(ProcessMemory memory, long configuredLimit, long reserved) {
        long resident = memory.resident();
        long limit = configuredLimit > 0 ? configuredLimit : memory.cgroupLimit().orElse(memory.hostAvailable() + resident);
        return limit - resident - Math.max(0, ProcessMemory.maxHeap() - ProcessMemory.committedHeap()) - OVERHEAD - reserved;
    }

    public static MemoryBudget split(ProcessMemory memory, Request request) {
        long resident = memory.resident();
        long limit;
        String limitSource;
        var cgroup = memory.cgroupLimit();
        if (request.configuredLimit() > 0) {
            limit = request.configuredLimit();
            limitSource = "ORTSERVE_MEMORY_LIMIT";
        } else if (cgroup.isPresent()) {
            limit = cgroup.getAsLong();
            limitSource = "the cgroup's memory limit";
        } else {
            limit = memory.hostAvailable() + resident;
            limitSource = "the host's available memory and this process's";
        }
        long heapGrowth = Math.max(0, ProcessMemory.maxHeap() - ProcessMemory.committedHeap());
        // what the KV and the working memory it allows share
        long room = limit - resident - heapGrowth - OVERHEAD - request.otherKv() - request.otherWorking();
        Working working = request.working();
        long fits = working.kvWithin(room);
        List<String> warnings = new ArrayList<>();
        long kv;
        String kvSource;
        if (request.configuredKv() >= 0) {
            kv = request.configuredKv();
            kvSource = "ORTSERVE_ENGINE_KV_CACHE_BYTES";
            if (kv > fits) {
                warnings.add(String.format(Locale.ROOT, "ORTSERVE_ENGINE_KV_CACHE_BYTES=%s does not fit the memory limit (%s): capped to the %s left",
                        mib(kv), mib(limit), mib(fits)));
                kv = fits;
                kvSource += ", capped to the limit";
            }
        } else {
            kv = Math.min(request.kvUsable(), fits);
            kvSource = kv == request.kvUsable() ? "what max-sequences rows of the whole context take" : "the rest of the limit";
        }
        long maxDirect = ProcessMemory.maxDirect() - 2 * request.otherKv();
        if (2 * kv > maxDirect) {
            warnings.add(String.format(Locale.ROOT, "the KV budget %s needs %s of direct memory (a batch is copied when it changes), "
                            + "more than -XX:MaxDirectMemorySize (%s%s): capped to %s; start the JVM with -XX:MaxDirectMemorySize=%s to use it all",
                    mib(kv), mib(2 * kv), mib(maxDirect), ProcessMemory.maxDirectOption().isPresent() ? "" : ", by default the heap's maximum", mib(maxDirect / 2), mib(2 * kv)));
            kv = maxDirect / 2;
            kvSource += ", capped to half of -XX:MaxDirectMemorySize";
        }
        MemoryBudget budget = new MemoryBudget(limit, limitSource, resident, heapGrowth, working.beside(kv), OVERHEAD, kv, kvSource, maxDirect,
                request.otherKv() + request.otherWorking(),
                List.copyOf(warnings));
        if (fits < request.kvMinimum() && kv < request.kvMinimum()) {
            throw new DoesNotFitException(String.format(Locale.ROOT, "The memory budget does not hold the model and the least KV (%s): %s; "
                    + "raise the limit, lower the JVM's heap (-Xmx) or the context (ORTSERVE_ENGINE_MAX_MODEL_LEN)",
                    mib(request.kvMinimum()), budget.describe()));
        }
        return budget;
    }

    /**
     * A warning for a start under a memory limit (configured or the cgroup's) whose malloc may keep freed KV buffers
     * resident ({@link ProcessMemory#mallocKeepsFreedBuffers}), or null.
     */
    public String mallocWarning(ProcessMemory memory, java.util.Map<String, String> environment) {
        if (limitSource.startsWith("the host") || !memory.mallocKeepsFreedBuffers(environment)) return null;
        return "glibc's malloc may keep freed KV buffers resident beyond the KV budget (its mmap threshold rises with each freed "
                + "buffer): start the JVM with MALLOC_MMAP_THRESHOLD_=65536 in its environment, as the images and the README's command "
                + "do, so that the resident set follows the KV";
    }

    /** What is left of the limit after every part (negative: the parts exceed it, possible when KV was configured). */
    public long unassigned() {
        return limit - resident - heapGrowth - working - overhead - others - kv;
    }

    /** The split in one line, as the startup log prints it. */
    public String describe() {
        return String.format(Locale.ROOT, "limit %s (%s) = resident at ready %s + heap growth %s (-Xmx %s) + onnxruntime working %s + overhead %s"
                        + "%s + KV %s (%s) + unassigned %s; direct memory limit %s",
                mib(limit), limitSource, mib(resident), mib(heapGrowth), mib(ProcessMemory.maxHeap()), mib(working), mib(overhead),
                others == 0 ? "" : " + other models' KV and working " + mib(others), mib(kv), kvSource, mib(unassigned()), mib(maxDirect));
    }

    static String mib(long bytes) {
        return bytes >= (10L << 30) ? String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30))
                : String.format(Locale.ROOT, "%d MiB", bytes >> 20);
    }
}
