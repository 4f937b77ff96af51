package dev.ortserve.engine;

/**
 * The prefix cache at one moment: memory held (exactly: the blocks' native buffers) against its
 * budget, blocks, lookups, and prompt tokens looked up against tokens reused.
 *
 * @param references block references held by running sequences (zero when nothing runs)
 */
public record PrefixCacheStats(long bytes, long budgetBytes, long blocks, long lookups, long promptTokens,
                               long hitTokens, long references) {
}
