package dev.ortserve.engine.rewrite;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two replicas sharing one model cache load the same model at once (the soak's second replica failed
 * to load its LoRA model with "Directory not empty" when the first had just renamed its rewrite into
 * place): the one that renames second serves the first one's entry.
 */
class CacheEntriesTest {

    @TempDir
    Path dir;

    @Test
    void theProcessThatRenamesSecondDropsItsCopyAndKeepsTheFirstOnes() throws Exception {
        Path entry = Files.createDirectories(dir.resolve("key"));
        Files.writeString(entry.resolve("model.onnx"), "first");
        Path tmp = Files.createTempDirectory(dir, "key.tmp");
        Files.writeString(tmp.resolve("model.onnx"), "second");

        // what a plain rename does on Linux: not FileAlreadyExistsException, a FileSystemException (ENOTEMPTY)
        assertThrows(FileSystemException.class, () -> Files.move(tmp, entry, java.nio.file.StandardCopyOption.ATOMIC_MOVE));

        assertFalse(CacheEntries.publish(tmp, entry));
        assertFalse(Files.exists(tmp), "the loser's copy is deleted");
        assertEquals("first", Files.readString(entry.resolve("model.onnx")));

        Path fresh = Files.createTempDirectory(dir, "other.tmp");
        Files.writeString(fresh.resolve("model.onnx"), "only");
        assertTrue(CacheEntries.publish(fresh, dir.resolve("other")));
        assertEquals("only", Files.readString(dir.resolve("other").resolve("model.onnx")));
    }

    @Test
    void aRenameThatFailsForAnotherReasonIsStillAnError() throws Exception {
        Path tmp = Files.createTempDirectory(dir, "key.tmp");
        assertThrows(FileSystemException.class, () -> CacheEntries.publish(tmp, dir.resolve("no-such-parent").resolve("key")));
        assertTrue(Files.exists(tmp));
    }
}
