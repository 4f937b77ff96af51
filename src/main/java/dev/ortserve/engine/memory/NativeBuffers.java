package dev.ortserve.engine.memory;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * The engine's native memory, held exactly as long as it is used:
 * <ul>
 * <li>{@link #free} gives a direct buffer's memory back at once (the JDK frees direct buffers only when a
 * garbage collection finds them unreachable: with a large heap that sees little garbage, KV buffers the
 * engine has let go of stay resident, up to {@code -XX:MaxDirectMemorySize}, which defaults to the heap's
 * maximum);</li>
 * <li>{@link #view} reads an onnxruntime tensor's elements where they are, without the copy onto the Java
 * heap that {@link OnnxTensor#getFloatBuffer()} makes (a repack read every layer of the batch's KV, a step
 * every row's logits, as new heap arrays: garbage of the KV's size per repack, which grew the heap by
 * gigabytes under load).</li>
 * </ul>
 * Both reach past the public API (onnxruntime's private native buffer accessor, the JDK's buffer cleaner);
 * when either is not reachable, reads copy and buffers are left to the collector, as before.
 */
public final class NativeBuffers {

    private static final MethodHandle TENSOR_BUFFER = tensorBuffer();
    private static final MethodHandle INVOKE_CLEANER = invokeCleaner();
    private static final java.util.concurrent.atomic.AtomicLong LIVE = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong PEAK = new java.util.concurrent.atomic.AtomicLong();

    private NativeBuffers() {
    }

    private static MethodHandle tensorBuffer() {
        try {
            Method m = OnnxTensor.class.getDeclaredMethod("getBuffer");
            m.setAccessible(true);
            return MethodHandles.lookup().unreflect(m);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static MethodHandle invokeCleaner() {
        try {
            Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
            Field f = unsafeClass.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            Object unsafe = f.get(null);
            return MethodHandles.lookup().findVirtual(unsafeClass, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
                    .bindTo(unsafe);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** Whether {@link #view} reads tensors in place and {@link #free} frees at once (false: copies and the collector). */
    public static boolean exact() {
        return TENSOR_BUFFER != null && INVOKE_CLEANER != null;
    }

    /**
     * A direct buffer of {@code bytes} zeroed bytes in native order, to be given back with {@link #free}
     * (or left to the collector).
     */
    public static ByteBuffer allocate(long bytes) {
        if (bytes > Integer.MAX_VALUE) throw new IllegalArgumentException("one buffer holds at most 2 GiB, not " + bytes + " bytes");
        ByteBuffer b = ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder());
        PEAK.accumulateAndGet(LIVE.addAndGet(bytes), Math::max);
        return b;
    }

    /** Bytes of the buffers made by {@link #allocate} and not yet {@link #free}d: the engine's KV and step inputs, exactly. */
    public static long live() {
        return LIVE.get();
    }

    /** The most {@link #live} bytes at once since the last {@link #resetPeak}. */
    public static long peak() {
        return PEAK.get();
    }

    /** Starts a new high-water mark at what is live now. */
    public static void resetPeak() {
        PEAK.set(LIVE.get());
    }

    /**
     * Frees a direct buffer made by {@link #allocate} now. Nothing may read it afterwards: a tensor wrapping it must be
     * closed first, and it is freed once only (the JDK does not tell a freed buffer from a live one). Null and heap
     * buffers are ignored.
     */
    public static void free(ByteBuffer buffer) {
        if (buffer == null || !buffer.isDirect() || buffer.capacity() == 0 || INVOKE_CLEANER == null) return;
        try {
            INVOKE_CLEANER.invokeExact(buffer);
            LIVE.addAndGet(-buffer.capacity());
        } catch (IllegalArgumentException e) {
            // a slice or duplicate has no cleaner of its own: the collector frees its parent
        } catch (Throwable e) {
            // not freed now: the collector does it later
        }
    }

    /**
     * The elements of a float32 or float16 tensor, read where they are (a view valid until the tensor is
     * closed), or a copy when they cannot be reached. float16 elements come as shorts (their bits).
     */
    public static Buffer view(OnnxTensor tensor) {
        OnnxJavaType type = tensor.getInfo().type;
        ByteBuffer bytes = bytes(tensor);
        if (type == OnnxJavaType.FLOAT) return bytes != null ? bytes.asFloatBuffer() : tensor.getFloatBuffer();
        if (type == OnnxJavaType.FLOAT16 || type == OnnxJavaType.BFLOAT16) {
            return bytes != null ? bytes.asShortBuffer() : shorts(tensor);
        }
        throw new IllegalArgumentException("a float32 or float16 tensor, not " + type);
    }

    /** A float32 tensor's elements, read where they are while it is open (a copy when they cannot be reached). */
    public static FloatBuffer floats(OnnxTensor tensor) {
        if (tensor.getInfo().type != OnnxJavaType.FLOAT) return tensor.getFloatBuffer(); // converted: a copy
        ByteBuffer bytes = bytes(tensor);
        return bytes != null ? bytes.asFloatBuffer() : tensor.getFloatBuffer();
    }

    private static ShortBuffer shorts(OnnxTensor tensor) {
        ByteBuffer copy = tensor.getByteBuffer().order(ByteOrder.nativeOrder());
        return copy.asShortBuffer();
    }

    private static ByteBuffer bytes(OnnxTensor tensor) {
        if (TENSOR_BUFFER == null) return null;
        try {
            return ((ByteBuffer) TENSOR_BUFFER.invokeExact(tensor)).order(ByteOrder.nativeOrder());
        } catch (Throwable e) {
            return null;
        }
    }
}
