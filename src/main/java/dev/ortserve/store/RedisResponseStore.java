package dev.ortserve.store;

import io.quarkus.redis.datasource.ReactiveRedisDataSource;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.redis.client.Response;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Conversations in Redis, shared by every replica. Layout: one hash per conversation,
 * {@code ortserve:conv:{<conversation>}}, whose fields are {@code r:<response id>} (the encoded
 * record), {@code o:<response id>} (its owner digest) and {@code bytes} (the conversation's size).
 * One key per conversation means one hash slot on Redis Cluster, one TTL that every write and
 * every continuation refreshes for the whole chain, and a rebuild of any depth in one round trip
 * (a script doing HGETALL + PEXPIRE). Writes and deletes are scripts too, so caps and byte counts
 * are checked and updated atomically.
 */
public class RedisResponseStore implements ResponseStore {

    static final String PUT = """
            local total = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
            local added = tonumber(ARGV[3]) - redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            if total + added > tonumber(ARGV[4]) then return {0, total} end
            redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], ARGV[2], 'o:' .. ARGV[1], ARGV[6])
            redis.call('HINCRBY', KEYS[1], 'bytes', added)
            redis.call('PEXPIRE', KEYS[1], ARGV[5])
            return {1, total + added}
            """;

    static final String CHAIN = """
            local all = redis.call('HGETALL', KEYS[1])
            if #all > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
            return all
            """;

    static final String DELETE = """
            if redis.call('HGET', KEYS[1], 'o:' .. ARGV[1]) ~= ARGV[2] then return 0 end
            local len = redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1], 'o:' .. ARGV[1])
            redis.call('HINCRBY', KEYS[1], 'bytes', -len)
            if redis.call('HLEN', KEYS[1]) <= 1 then redis.call('DEL', KEYS[1]) end
            return 1
            """;

    private final ReactiveRedisDataSource redis;
    private final Duration ttl;
    private final int maxRecordBytes;
    private final long maxConversationBytes;
    private final Duration timeout;

    public RedisResponseStore(ReactiveRedisDataSource redis, Duration ttl, int maxRecordBytes, long maxConversationBytes, Duration timeout) {
        this.redis = redis;
        this.ttl = ttl;
        this.maxRecordBytes = maxRecordBytes;
        this.maxConversationBytes = maxConversationBytes;
        this.timeout = timeout;
    }

    public static String key(String responseId) {
        return "ortserve:conv:{" + ResponseIds.conversationOf(responseId) + "}";
    }

    @Override
    public Uni<StoredResponse> get(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().nullItem();
        return guarded(redis.execute("HGET", key(id), "r:" + id)).map(reply -> {
            if (reply == null) return null;
            StoredResponse r = StoredResponseCodec.decode(reply.toString());
            return r.owner().equals(owner) ? r : null;
        });
    }

    @Override
    public Uni<Conversation> chain(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().nullItem();
        return guarded(redis.execute("EVAL", CHAIN, "1", key(id), Long.toString(ttl.toMillis()))).map(reply -> {
            if (reply == null || reply.size() == 0) return null;
            List<String> records = new ArrayList<>();
            long bytes = 0;
            for (int i = 0; i + 1 < reply.size(); i += 2) {
                String field = reply.get(i).toString();
                if (field.startsWith("r:")) records.add(reply.get(i + 1).toString());
                else if (field.equals("bytes")) bytes = reply.get(i + 1).toLong();
            }
            return ConversationChains.walk(records, id, owner, bytes);
        });
    }

    @Override
    public Uni<Void> put(StoredResponse response) {
        String encoded = StoredResponseCodec.encode(response);
        int size = StoredResponseCodec.sizeOf(encoded);
        if (size > maxRecordBytes) return Uni.createFrom().failure(new RecordTooLargeException(size, maxRecordBytes));
        return guarded(redis.execute("EVAL", PUT, "1", key(response.id()), response.id(), encoded, Integer.toString(size),
                Long.toString(maxConversationBytes), Long.toString(ttl.toMillis()), response.owner())).map(reply -> {
            if (reply.get(0).toInteger() == 0) {
                throw new ConversationFullException(reply.get(1).toLong(), size, maxConversationBytes);
            }
            return null;
        });
    }

    @Override
    public Uni<Boolean> delete(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().item(false);
        return guarded(redis.execute("EVAL", DELETE, "1", key(id), id, owner)).map(reply -> reply.toInteger() == 1);
    }

    @Override
    public Uni<Void> ping() {
        return guarded(redis.execute("PING")).replaceWithVoid();
    }

    private <T> Uni<T> guarded(Uni<T> operation) {
        return operation.ifNoItem().after(timeout)
                .failWith(() -> new StoreUnavailableException("Redis did not answer within " + timeout.toMillis() + " ms", null))
                .onFailure(f -> !(f instanceof StoreUnavailableException))
                .transform(f -> new StoreUnavailableException("Redis is unreachable: " + f.getMessage(), f));
    }

}
