package dev.ortserve.engine;

/**
 * The prefix cache at one moment: memory held (exactly: the blocks' native buffers) against its
 * cap, blocks, lookups, and prompt tokens looked up against tokens reused.
 *
 * @param budgetBytes       the most the cache may hold: {@code ORTSERVE_ENGINE_PREFIX_CACHE_BYTES}, at most the KV
 *                          budget (inside which the cache lives: running sequences' reservations come first)
 * @param references        block references held by running sequences (zero when nothing runs)
 * @param unreferencedBytes bytes of blocks no running sequence references: what the cache adds to the KV held
 *                          against the KV budget (referenced blocks are inside their sequences' reservations),
 *                          and what is evicted when a request needs the room
 * @param evictions         blocks evicted so far (for the cap or for the KV budget)
 */
public record PrefixCacheStats(long bytes, long budgetBytes, long blocks, long lookups, long promptTokens,
                               long hitTokens, long references, long unreferencedBytes, long evictions) {
}
