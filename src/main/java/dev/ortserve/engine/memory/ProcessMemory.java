package dev.ortserve.engine.memory;

import java.io.IOException;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalLong;

/**
 * What this process may use and uses now, as Linux and the JVM tell it: the memory limit of its cgroup
 * (v2 {@code memory.max}, v1 {@code memory.limit_in_bytes}), the host's available memory, its resident set,
 * and the JVM's heap and direct-memory limits. Every reading has a stated fallback off Linux.
 */
public final class ProcessMemory {

    /** cgroup v1 writes "no limit" as a page-rounded 2^63 - 1; anything this large is no limit. */
    private static final long NO_LIMIT = 1L << 60;

    private final Path procRoot;
    private final Path cgroupRoot;

    /** This process, through /proc and /sys/fs/cgroup. */
    public ProcessMemory() {
        this(Path.of("/proc"), Path.of("/sys/fs/cgroup"));
    }

    /** Readings from other roots (tests lay out the files a kernel would). */
    public ProcessMemory(Path procRoot, Path cgroupRoot) {
        this.procRoot = procRoot;
        this.cgroupRoot = cgroupRoot;
    }

    /**
     * The memory limit of this process's cgroup, if it has one: cgroup v2's {@code memory.max} of the
     * process's group, or v1's {@code memory.limit_in_bytes} of its memory controller's group (each looked up
     * at the path /proc/self/cgroup names, then at the root, where a container sees its own group).
     */
    public OptionalLong cgroupLimit() {
        List<String> lines;
        try {
            lines = Files.readAllLines(procRoot.resolve("self/cgroup"));
        } catch (IOException | RuntimeException e) {
            return OptionalLong.empty();
        }
        for (String line : lines) {
            String[] parts = line.split(":", 3);
            if (parts.length < 3) continue;
            String group = parts[2].startsWith("/") ? parts[2].substring(1) : parts[2];
            OptionalLong limit = OptionalLong.empty();
            if (parts[0].equals("0") && parts[1].isEmpty()) {
                limit = read(cgroupRoot.resolve(group).resolve("memory.max"), cgroupRoot.resolve("memory.max"));
            } else if (List.of(parts[1].split(",")).contains("memory")) {
                Path v1 = cgroupRoot.resolve("memory");
                limit = read(v1.resolve(group).resolve("memory.limit_in_bytes"), v1.resolve("memory.limit_in_bytes"));
            }
            if (limit.isPresent()) return limit;
        }
        return OptionalLong.empty();
    }

    private static OptionalLong read(Path own, Path root) {
        for (Path p : own.equals(root) ? List.of(own) : List.of(own, root)) {
            try {
                if (!Files.isRegularFile(p)) continue;
                String v = Files.readString(p).trim();
                if (v.equals("max")) return OptionalLong.empty();
                long bytes = Long.parseLong(v);
                return bytes <= 0 || bytes >= NO_LIMIT ? OptionalLong.empty() : OptionalLong.of(bytes);
            } catch (IOException | RuntimeException e) {
                // unreadable: try the next place
            }
        }
        return OptionalLong.empty();
    }

    /**
     * Whether glibc's malloc may keep freed KV buffers resident: on Linux, unless its mmap threshold is fixed by
     * {@code MALLOC_MMAP_THRESHOLD_} or {@code GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...}. Direct buffers come from
     * malloc; glibc maps a large one and unmaps it when freed, but each such free raises its threshold (up to 32 MiB), after
     * which buffers of that size come from its heap, whose freed memory it rarely gives back: KV freed by a repack or a
     * leaving sequence stays in the resident set (measured: 4 x 1,600-token streams, 378 MiB more peak RSS than with a 1 MiB
     * threshold; 16 streams, 197 MiB more with 1 MiB than with 64 KiB, below a prefix-cache block's layer).
     */
    public boolean mallocKeepsFreedBuffers(java.util.Map<String, String> environment) {
        if (!Files.isDirectory(procRoot.resolve("self"))) return false;
        if (environment.containsKey("MALLOC_MMAP_THRESHOLD_")) return false;
        return !environment.getOrDefault("GLIBC_TUNABLES", "").contains("glibc.malloc.mmap_threshold");
    }

    /** The host's available memory now (MemAvailable), or the JVM's view of free physical memory. */
    public long hostAvailable() {
        long kb = field(procRoot.resolve("meminfo"), "MemAvailable");
        if (kb >= 0) return kb * 1024;
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) return sun.getFreeMemorySize();
        return Runtime.getRuntime().maxMemory();
    }

    /** This process's resident set now (VmRSS), or the JVM heap's committed bytes when /proc cannot tell. */
    public long resident() {
        long kb = field(procRoot.resolve("self/status"), "VmRSS");
        return kb >= 0 ? kb * 1024 : Runtime.getRuntime().totalMemory();
    }

    /** The most this process was resident at once (VmHWM), or -1 when /proc cannot tell. */
    public long peakResident() {
        long kb = field(procRoot.resolve("self/status"), "VmHWM");
        return kb >= 0 ? kb * 1024 : -1;
    }

    private static long field(Path file, String name) {
        try {
            for (String line : Files.readAllLines(file)) {
                if (line.startsWith(name + ":")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or no such field
        }
        return -1;
    }

    /** The most the JVM heap may grow to (-Xmx, or the JVM's default share of the machine). */
    public static long maxHeap() {
        return Runtime.getRuntime().maxMemory();
    }

    /** Heap the JVM holds from the system now (part of the resident set once touched). */
    public static long committedHeap() {
        return Runtime.getRuntime().totalMemory();
    }

    /** The JVM's limit on direct buffers: -XX:MaxDirectMemorySize, or the heap's maximum when it is not set (the JDK's default). */
    public static long maxDirect() {
        return maxDirectOption().orElse(maxHeap());
    }

    /** -XX:MaxDirectMemorySize when it is set. */
    public static OptionalLong maxDirectOption() {
        try {
            var bean = ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            long set = Long.parseLong(bean.getVMOption("MaxDirectMemorySize").getValue());
            if (set > 0) return OptionalLong.of(set);
        } catch (RuntimeException e) {
            // not HotSpot: the JDK's default
        }
        return OptionalLong.empty();
    }

    /** Direct buffer memory in use now. */
    public static long direct() {
        for (BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (pool.getName().equals("direct")) return pool.getMemoryUsed();
        }
        return 0;
    }
}
