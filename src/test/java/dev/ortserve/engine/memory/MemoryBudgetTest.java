package dev.ortserve.engine.memory;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The memory limit as Linux tells it (cgroup v1 and v2, nested groups and a container's own root, "no limit"),
 * and its split: the KV is what the limit leaves after the measured resident set, the heap's possible growth,
 * onnxruntime's working memory and the overhead; a configured KV budget that does not fit is capped with a
 * warning, one larger than half the direct-memory limit too, and a limit that cannot hold the model is a
 * start error naming every part.
 */
class MemoryBudgetTest {

    @TempDir
    Path tmp;

    private static final long GIB = 1L << 30, MIB = 1L << 20;

    private ProcessMemory memory(String cgroupLines, String status, String meminfo) throws IOException {
        Path proc = tmp.resolve("proc");
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/cgroup"), cgroupLines);
        Files.writeString(proc.resolve("self/status"), status);
        Files.writeString(proc.resolve("meminfo"), meminfo);
        return new ProcessMemory(proc, tmp.resolve("cgroup"));
    }

    private void write(String path, String content) throws IOException {
        Path p = tmp.resolve("cgroup").resolve(path);
        Files.createDirectories(p.getParent());
        Files.writeString(p, content);
    }

    private static final String STATUS = "Name:\tjava\nVmHWM:\t 3145728 kB\nVmRSS:\t 2097152 kB\n";
    private static final String MEMINFO = "MemTotal:       24000000 kB\nMemAvailable:   10485760 kB\n";

    /** glibc keeps freed buffers of up to its raised mmap threshold in its heap, unless the threshold is fixed at start. */
    @Test
    void mallocKeepsFreedBuffersUnlessItsMmapThresholdIsFixed() throws IOException {
        ProcessMemory linux = memory("0::/\n", STATUS, MEMINFO);
        assertEquals(true, linux.mallocKeepsFreedBuffers(java.util.Map.of()));
        assertEquals(false, linux.mallocKeepsFreedBuffers(java.util.Map.of("MALLOC_MMAP_THRESHOLD_", "65536")));
        assertEquals(false, linux.mallocKeepsFreedBuffers(java.util.Map.of("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")));
        assertEquals(true, linux.mallocKeepsFreedBuffers(java.util.Map.of("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")));
        assertEquals(false, new ProcessMemory(tmp.resolve("no-proc"), tmp.resolve("cgroup")).mallocKeepsFreedBuffers(java.util.Map.of()),
                "no /proc: not Linux, not glibc's");
        // said at a start under a limit, not where the limit is the host's available memory
        MemoryBudget.Request request = new MemoryBudget.Request(64 * GIB, -1, 8 * GIB, 64 * MIB, 256 * MIB);
        assertTrue(MemoryBudget.split(linux, request).mallocWarning(linux, java.util.Map.of()).contains("MALLOC_MMAP_THRESHOLD_=65536"));
        assertNull(MemoryBudget.split(linux, request).mallocWarning(linux, java.util.Map.of("MALLOC_MMAP_THRESHOLD_", "65536")));
        assertNull(MemoryBudget.split(linux, new MemoryBudget.Request(0, -1, 8 * GIB, 64 * MIB, 256 * MIB)).mallocWarning(linux, java.util.Map.of()));
    }

    @Test
    void cgroupV1LimitOfTheProcesssOwnGroup() throws IOException {
        ProcessMemory m = memory("5:cpu:/\n4:memory:/kubepods/pod1/abc\n0::/\n", STATUS, MEMINFO);
        write("memory/kubepods/pod1/abc/memory.limit_in_bytes", "6442450944\n");
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        assertEquals(OptionalLong.of(6 * GIB), m.cgroupLimit());
        assertEquals(2 * GIB, m.resident());
        assertEquals(3 * GIB, m.peakResident());
        assertEquals(10 * GIB, m.hostAvailable());
    }

    @Test
    void cgroupV1InAContainerIsItsRootAndNoLimitIsNone() throws IOException {
        ProcessMemory m = memory("4:memory:/docker/abc\n", STATUS, MEMINFO);
        write("memory/memory.limit_in_bytes", "2147483648\n"); // a container sees its own group at the root
        assertEquals(OptionalLong.of(2 * GIB), m.cgroupLimit());
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        assertEquals(OptionalLong.empty(), m.cgroupLimit());
    }

    @Test
    void cgroupV2MemoryMax() throws IOException {
        ProcessMemory m = memory("0::/user.slice/app.scope\n", STATUS, MEMINFO);
        write("user.slice/app.scope/memory.max", "1073741824\n");
        assertEquals(OptionalLong.of(GIB), m.cgroupLimit());
        write("user.slice/app.scope/memory.max", "max\n");
        assertEquals(OptionalLong.empty(), m.cgroupLimit());
        ProcessMemory none = memory("", STATUS, MEMINFO);
        assertEquals(OptionalLong.empty(), none.cgroupLimit());
    }

    private static long heapGrowth() {
        return Math.max(0, ProcessMemory.maxHeap() - ProcessMemory.committedHeap());
    }

    @Test
    void theKvIsWhatTheLimitLeaves() throws IOException {
        ProcessMemory m = memory("", STATUS, MEMINFO);
        long limit = 2 * GIB + heapGrowth() + 100 * MIB + MemoryBudget.OVERHEAD + 500 * MIB;
        MemoryBudget b = MemoryBudget.split(m, new MemoryBudget.Request(limit, -1, 100 * GIB, MIB, 100 * MIB));
        assertEquals("ORTSERVE_MEMORY_LIMIT", b.limitSource());
        assertEquals(2 * GIB, b.resident());
        assertEquals(500 * MIB, b.kv(), b.describe());
        assertEquals(0, b.unassigned());
        assertTrue(b.warnings().isEmpty(), b.warnings().toString());
        assertTrue(b.describe().contains("KV 500 MiB (the rest of the limit)"), b.describe());

        // at most what the engine can use; the rest stays unassigned
        MemoryBudget small = MemoryBudget.split(m, new MemoryBudget.Request(limit, -1, 64 * MIB, MIB, 100 * MIB));
        assertEquals(64 * MIB, small.kv());
        assertEquals(436 * MIB, small.unassigned());
    }

    @Test
    void withoutALimitTheHostsAvailableMemoryAndTheProcesssOwn() throws IOException {
        ProcessMemory m = memory("", STATUS, MEMINFO);
        MemoryBudget b = MemoryBudget.split(m, new MemoryBudget.Request(0, -1, 64 * MIB, MIB, 0));
        assertEquals(10 * GIB + 2 * GIB, b.limit());
        assertTrue(b.limitSource().contains("host"), b.limitSource());
    }

    /**
     * A prefill chunk's attention scores grow with the longest sequence, and no sequence is longer than the positions the
     * KV budget holds: working memory is counted at those positions (or at the whole context when the KV holds more),
     * and the KV with the working memory it allows fill the limit.
     */
    @Test
    void workingMemoryIsCountedAtTheLongestSequenceTheKvHolds() throws IOException {
        ProcessMemory m = memory("", STATUS, MEMINFO);
        // 1 MiB of KV and 256 KiB of attention scores per position, 100 MiB fixed, a context of 4,096 positions
        MemoryBudget.Working w = new MemoryBudget.Working(100 * MIB, 256 * 1024, 4096, MIB);
        long base = 2 * GIB + heapGrowth() + MemoryBudget.OVERHEAD;
        MemoryBudget configured = MemoryBudget.split(m, new MemoryBudget.Request(base + 8 * GIB, 1000 * MIB, 100 * GIB, MIB, w));
        assertEquals(1000 * MIB, configured.kv());
        assertEquals(350 * MIB, configured.working(), "1,000 positions, not the context's 4,096 (1,124 MiB)");
        // derived: 1,350 MiB for both -> 1,000 positions of KV and their 350 MiB of working memory
        MemoryBudget derived = MemoryBudget.split(m, new MemoryBudget.Request(base + 1350 * MIB, -1, 100 * GIB, MIB, w));
        assertEquals(1000 * MIB, derived.kv(), 2 * MIB, derived.describe());
        assertTrue(derived.unassigned() >= 0 && derived.unassigned() < 2 * MIB, derived.describe());
        // a KV budget that holds more than the context (1,500 positions of a 1,024-position context): working memory at the context
        MemoryBudget.Working shortContext = new MemoryBudget.Working(100 * MIB, 256 * 1024, 1024, MIB);
        MemoryBudget large = MemoryBudget.split(m, new MemoryBudget.Request(base + 8 * GIB, -1, 1500 * MIB, MIB, shortContext));
        assertEquals(1500 * MIB, large.kv(), large.describe());
        assertEquals(100 * MIB + 256 * MIB, large.working());
        // too little for the least KV beside its working memory: a start error, as before
        assertThrows(MemoryBudget.DoesNotFitException.class,
                () -> MemoryBudget.split(m, new MemoryBudget.Request(base + 110 * MIB, -1, 100 * GIB, 16 * MIB, w)));
    }

    @Test
    void aConfiguredKvBudgetThatDoesNotFitIsCappedWithAWarning() throws IOException {
        ProcessMemory m = memory("", STATUS, MEMINFO);
        long limit = 2 * GIB + heapGrowth() + MemoryBudget.OVERHEAD + 300 * MIB;
        MemoryBudget fits = MemoryBudget.split(m, new MemoryBudget.Request(limit, 200 * MIB, GIB, MIB, 0));
        assertEquals(200 * MIB, fits.kv());
        assertTrue(fits.warnings().isEmpty());
        MemoryBudget capped = MemoryBudget.split(m, new MemoryBudget.Request(limit, GIB, GIB, MIB, 0));
        assertEquals(300 * MIB, capped.kv());
        assertEquals(1, capped.warnings().size());
        assertTrue(capped.warnings().get(0).contains("ORTSERVE_ENGINE_KV_CACHE_BYTES=1024 MiB does not fit"), capped.warnings().get(0));
    }

    @Test
    void aKvBudgetOverHalfTheDirectMemoryLimitIsCappedWithAWarningNamingBoth() throws IOException {
        ProcessMemory m = memory("", STATUS, MEMINFO);
        long maxDirect = ProcessMemory.maxDirect();
        long limit = 2 * GIB + heapGrowth() + MemoryBudget.OVERHEAD + 2 * maxDirect;
        MemoryBudget b = MemoryBudget.split(m, new MemoryBudget.Request(limit, -1, maxDirect, MIB, 0));
        assertEquals(maxDirect / 2, b.kv());
        assertTrue(b.warnings().get(0).contains("-XX:MaxDirectMemorySize"), b.warnings().toString());
    }

    @Test
    void aLimitThatCannotHoldTheModelIsAStartErrorNamingEveryPart() throws IOException {
        ProcessMemory m = memory("4:memory:/\n", STATUS, MEMINFO);
        write("memory/memory.limit_in_bytes", String.valueOf(GIB)); // less than the 2 GiB resident
        var e = assertThrows(MemoryBudget.DoesNotFitException.class,
                () -> MemoryBudget.split(m, new MemoryBudget.Request(0, -1, GIB, 16 * MIB, 64 * MIB)));
        assertTrue(e.getMessage().contains("limit 1024 MiB (the cgroup's memory limit)"), e.getMessage());
        assertTrue(e.getMessage().contains("resident at ready 2048 MiB"), e.getMessage());
        assertTrue(e.getMessage().contains("heap growth"), e.getMessage());
        assertTrue(e.getMessage().contains("onnxruntime working 64 MiB"), e.getMessage());
        assertTrue(e.getMessage().contains("-Xmx"), e.getMessage());
    }
}
