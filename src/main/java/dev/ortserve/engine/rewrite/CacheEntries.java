package dev.ortserve.engine.rewrite;

import java.io.IOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Directories of derived files (rewritten models, composed vision decoders) that several processes
 * may build at once: replicas sharing one model cache volume load the same model together. Each
 * builds into a temporary directory beside the entry and renames it into place; the rename is the
 * commit, so an entry is only ever seen whole.
 */
public final class CacheEntries {

    private CacheEntries() {
    }

    /**
     * Renames the finished {@code tmp} to {@code entry}. False when another process put an entry
     * there first (Linux refuses a rename onto a non-empty directory with ENOTEMPTY, which Java
     * reports as a plain {@link FileSystemException}): {@code tmp} is deleted and the caller reads
     * theirs, which was built from the same key.
     */
    public static boolean publish(Path tmp, Path entry) throws IOException {
        try {
            try {
                Files.move(tmp, entry, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, entry);
            }
            return true;
        } catch (FileSystemException e) {
            if (!Files.isDirectory(entry)) throw e;
            deleteTree(tmp);
            return false;
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }
}
