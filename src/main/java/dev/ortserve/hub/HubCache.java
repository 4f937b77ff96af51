package dev.ortserve.hub;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Pattern;

/**
 * huggingface_hub's cache layout for one repository, exactly as its file_download.py writes it:
 * <pre>
 * {cache}/models--owner--name/blobs/{etag}                  file contents, named by the Hub's ETag
 *                            /snapshots/{commit}/{path}     relative symlinks to ../../blobs/{etag}
 *                            /refs/{revision}               the commit the revision pointed to
 * {cache}/.locks/models--owner--name/{etag}.lock            held while a blob is written
 * </pre>
 * so that a cache written by huggingface-cli, transformers or vLLM is read here and the reverse.
 */
public final class HubCache {

    static final Pattern COMMIT = Pattern.compile("[0-9a-f]{40}");
    // one lock per lock file inside this JVM: FileChannel locks are held per process, not per thread
    private static final ConcurrentHashMap<Path, ReentrantLock> IN_PROCESS = new ConcurrentHashMap<>();

    private final Path root;
    private final Path repoDir;
    private final Path locksDir;

    public HubCache(Path cacheDir, HubRepoId id) {
        this.root = cacheDir;
        this.repoDir = cacheDir.resolve(id.cacheFolderName());
        this.locksDir = cacheDir.resolve(".locks").resolve(id.cacheFolderName());
    }

    public Path repoDir() {
        return repoDir;
    }

    public Path blob(String etag) {
        return repoDir.resolve("blobs").resolve(etag);
    }

    public Path snapshot(String commit) {
        return repoDir.resolve("snapshots").resolve(commit);
    }

    /** The commit a revision resolves to from the cache alone: a full commit hash is itself, a branch or tag is read from refs/. */
    public Optional<String> commitFor(String revision) {
        if (COMMIT.matcher(revision).matches()) return Optional.of(revision);
        Path ref = repoDir.resolve("refs").resolve(revision);
        try {
            return Files.isRegularFile(ref) ? Optional.of(Files.readString(ref).strip()).filter(s -> !s.isEmpty()) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** Records that {@code revision} points to {@code commit} (written atomically, as huggingface_hub does). */
    public void writeRef(String revision, String commit) throws IOException {
        if (revision.equals(commit)) return;
        Path ref = repoDir.resolve("refs").resolve(revision);
        if (Files.isRegularFile(ref) && Files.readString(ref).equals(commit)) return;
        Files.createDirectories(ref.getParent());
        Path tmp = ref.resolveSibling(ref.getFileName() + "." + UUID.randomUUID().toString().substring(0, 8) + ".tmp");
        Files.writeString(tmp, commit);
        moveAtomically(tmp, ref);
    }

    /** Points snapshots/{commit}/{file} at blobs/{etag} with a relative symlink. */
    public Path link(String commit, String file, String etag) throws IOException {
        Path pointer = snapshot(commit).resolve(file);
        Files.createDirectories(pointer.getParent());
        Path target = pointer.getParent().relativize(blob(etag));
        Path tmp = pointer.resolveSibling(pointer.getFileName() + "." + UUID.randomUUID().toString().substring(0, 8) + ".tmp");
        Files.createSymbolicLink(tmp, target);
        Files.move(tmp, pointer, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        return pointer;
    }

    /** Marks the cache for backup tools (CACHEDIR.TAG), as huggingface_hub does. */
    void tagCacheDir() {
        Path tag = root.resolve("CACHEDIR.TAG");
        if (Files.exists(tag)) return;
        try {
            Files.createDirectories(root);
            Files.writeString(tag, "Signature: 8a477f597d28d172789f06886806bc55\n"
                    + "# This file is a cache directory tag created by ortserve (huggingface_hub's cache layout).\n");
        } catch (IOException ignored) {
            // only a courtesy for backup tools
        }
    }

    /**
     * Holds the lock of one blob: other threads of this process and other processes sharing the
     * cache volume (replicas) wait here, so a blob is downloaded once.
     */
    public BlobLock lock(String etag) throws IOException {
        Path file = locksDir.resolve(etag + ".lock");
        Files.createDirectories(locksDir);
        ReentrantLock local = IN_PROCESS.computeIfAbsent(file.toAbsolutePath().normalize(), k -> new ReentrantLock());
        local.lock();
        try {
            FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
            try {
                FileLock lock = channel.lock();
                return new BlobLock(local, channel, lock);
            } catch (IOException | RuntimeException e) {
                channel.close();
                throw e;
            }
        } catch (IOException | RuntimeException e) {
            local.unlock();
            throw e;
        }
    }

    public static final class BlobLock implements AutoCloseable {
        private final ReentrantLock local;
        private final FileChannel channel;
        private final FileLock lock;

        BlobLock(ReentrantLock local, FileChannel channel, FileLock lock) {
            this.local = local;
            this.channel = channel;
            this.lock = lock;
        }

        @Override
        public void close() throws IOException {
            try {
                lock.release();
                channel.close();
            } finally {
                local.unlock();
            }
        }
    }

    static void moveAtomically(Path from, Path to) throws IOException {
        try {
            Files.move(from, to, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(from, to, StandardCopyOption.REPLACE_EXISTING);
        }
    }
}
