package dev.ortserve.engine.lora;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * onnxruntime's LoRA adapter file ({@code .onnx_adapter}: what {@code OrtLoraAdapter} loads and olive's
 * convert-adapters and onnxruntime's {@code AdapterFormat} write): a FlatBuffer with file identifier {@code TORT}
 * after onnxruntime/lora/adapter_format/adapter_schema.fbs,
 * <pre>
 * table Parameter { name:string; dims:[int64]; data_type:TensorDataType; raw_data:[uint8] (force_align: 8); }
 * table Adapter { format_version:int; adapter_version:int; model_version:int; parameters:[Parameter]; }
 * </pre>
 * with data types numbered as ONNX's (1 float, 10 float16). Written front to back (every offset points forward,
 * as FlatBuffers' unsigned offsets require), read by field index through each table's vtable.
 */
public final class AdapterFile {

    static final String IDENTIFIER = "TORT";
    static final int FORMAT_VERSION = 1;
    public static final int FLOAT = 1;
    public static final int FLOAT16 = 10;

    /** One named tensor of the adapter: a graph input's value. */
    public record Parameter(String name, long[] dims, int dataType, ByteBuffer data) {
        public long elements() {
            long n = 1;
            for (long d : dims) n *= d;
            return n;
        }
    }

    private AdapterFile() {
    }

    /** Writes the parameters as an adapter file (atomically: a temporary file moved into place). */
    public static void write(Path file, int adapterVersion, int modelVersion, List<Parameter> parameters) throws IOException {
        Writer w = new Writer();
        int root = w.reserve(4);
        w.bytes(IDENTIFIER.getBytes(StandardCharsets.US_ASCII));
        int adapterVtable = w.vtable(4, 4 + 4 * 4);
        w.align(4);
        int adapter = w.position();
        w.i32(adapter - adapterVtable);
        w.i32(FORMAT_VERSION);
        w.i32(adapterVersion);
        w.i32(modelVersion);
        int parametersField = w.reserve(4);
        w.patchOffset(root, adapter);
        w.align(4);
        w.patchOffset(parametersField, w.position());
        w.i32(parameters.size());
        int[] elements = new int[parameters.size()];
        for (int i = 0; i < elements.length; i++) elements[i] = w.reserve(4);
        int parameterVtable = w.vtable(4, 4 + 4 * 4);
        for (int i = 0; i < elements.length; i++) {
            Parameter p = parameters.get(i);
            w.align(4);
            int table = w.position();
            w.patchOffset(elements[i], table);
            w.i32(table - parameterVtable);
            int name = w.reserve(4), dims = w.reserve(4);
            w.i32(p.dataType());
            int data = w.reserve(4);
            w.align(4);
            w.patchOffset(name, w.position());
            byte[] n = p.name().getBytes(StandardCharsets.UTF_8);
            w.i32(n.length);
            w.bytes(n);
            w.bytes(new byte[] {0});
            w.alignBefore(8); // the int64 elements on 8 bytes, the length just before them
            w.patchOffset(dims, w.position());
            w.i32(p.dims().length);
            for (long d : p.dims()) w.i64(d);
            w.alignBefore(8); // force_align 8
            w.patchOffset(data, w.position());
            ByteBuffer bytes = p.data().duplicate();
            w.i32(bytes.remaining());
            w.buffer(bytes);
        }
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.TRUNCATE_EXISTING,
                java.nio.file.StandardOpenOption.WRITE)) {
            ByteBuffer out = w.finish();
            while (out.hasRemaining()) ch.write(out);
        }
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
    }

    /** The parameters of an adapter file (their data views of the file read into memory). */
    public static List<Parameter> read(Path file) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        try {
            if (b.capacity() < 8 || !IDENTIFIER.equals(new String(bytes(b, 4, 4), StandardCharsets.US_ASCII))) {
                throw new IOException(file + " is not an onnxruntime adapter file (no " + IDENTIFIER + " identifier)");
            }
            int adapter = b.getInt(0);
            int format = field(b, adapter, 0) == 0 ? 0 : b.getInt(field(b, adapter, 0));
            if (format != FORMAT_VERSION) throw new IOException(file + ": adapter format version " + format + " (this server reads " + FORMAT_VERSION + ")");
            List<Parameter> out = new ArrayList<>();
            int vector = target(b, field(b, adapter, 3));
            if (vector < 0) return out;
            int count = b.getInt(vector);
            for (int i = 0; i < count; i++) {
                int table = target(b, vector + 4 + 4 * i);
                int name = target(b, field(b, table, 0));
                String n = name < 0 ? "" : new String(bytes(b, name + 4, b.getInt(name)), StandardCharsets.UTF_8);
                int dims = target(b, field(b, table, 1));
                long[] d = new long[dims < 0 ? 0 : b.getInt(dims)];
                for (int j = 0; j < d.length; j++) d[j] = b.getLong(dims + 4 + 8 * j);
                int type = field(b, table, 2) == 0 ? 0 : b.getInt(field(b, table, 2));
                int data = target(b, field(b, table, 3));
                ByteBuffer raw = data < 0 ? ByteBuffer.allocate(0) : b.slice(data + 4, b.getInt(data)).order(ByteOrder.LITTLE_ENDIAN);
                out.add(new Parameter(n, d, type, raw));
            }
            return out;
        } catch (IndexOutOfBoundsException e) {
            throw new IOException(file + " is damaged: an offset points outside it", e);
        }
    }

    /** The position of a table's field {@code index}, or 0 when the table does not have it. */
    private static int field(ByteBuffer b, int table, int index) {
        int vtable = table - b.getInt(table);
        int size = b.getShort(vtable) & 0xffff;
        int at = 4 + 2 * index;
        if (at >= size) return 0;
        int offset = b.getShort(vtable + at) & 0xffff;
        return offset == 0 ? 0 : table + offset;
    }

    /** What the offset at {@code at} points to; -1 for an absent field. */
    private static int target(ByteBuffer b, int at) {
        return at == 0 ? -1 : at + b.getInt(at);
    }

    private static byte[] bytes(ByteBuffer b, int at, int length) {
        byte[] out = new byte[length];
        b.get(at, out);
        return out;
    }

    /** A growing little-endian buffer written front to back, offsets patched once their targets are placed. */
    private static final class Writer {
        private ByteBuffer buf = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);

        int position() {
            return buf.position();
        }

        private void room(long n) {
            if (buf.remaining() >= n) return;
            long size = Math.max((long) buf.capacity() * 2, buf.position() + n);
            if (size > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("an adapter file of more than 2 GB");
            ByteBuffer bigger = ByteBuffer.allocate((int) size).order(ByteOrder.LITTLE_ENDIAN);
            buf.flip();
            bigger.put(buf);
            buf = bigger;
        }

        void i32(int v) {
            room(4);
            buf.putInt(v);
        }

        void i64(long v) {
            room(8);
            buf.putLong(v);
        }

        void bytes(byte[] v) {
            room(v.length);
            buf.put(v);
        }

        void buffer(ByteBuffer v) {
            room(v.remaining());
            buf.put(v);
        }

        int reserve(int n) {
            int at = position();
            bytes(new byte[n]);
            return at;
        }

        void align(int n) {
            while (position() % n != 0) bytes(new byte[] {0});
        }

        /** Pads so that a 4-byte length written next is followed by data aligned on {@code n}. */
        void alignBefore(int n) {
            while ((position() + 4) % n != 0) bytes(new byte[] {0});
        }

        /** An unsigned offset at {@code at} to the later position {@code target}. */
        void patchOffset(int at, int target) {
            buf.putInt(at, target - at);
        }

        /** A vtable of {@code fields} 4-byte fields laid out in order after the table's vtable offset. */
        int vtable(int fields, int tableSize) {
            align(2);
            int at = position();
            room(4 + 2L * fields);
            buf.putShort((short) (4 + 2 * fields));
            buf.putShort((short) tableSize);
            for (int i = 0; i < fields; i++) buf.putShort((short) (4 + 4 * i));
            return at;
        }

        ByteBuffer finish() {
            align(8);
            return buf.flip();
        }
    }
}
