// Public face of store/: paths, the sessions.json registry, archives and locks.
// Other layers import store functionality only from here.

export * from './paths.js';
export * from './session-entry.js';
export { checkNotShared, isUsableEntry, sharedTranscriptError, transcriptSharing, type TranscriptSharing } from './shared-transcripts.js';
export * from './store-fs.js';
export { parseSessionStore, readSessionStore, serializeSessionStore, storeFileVersion, type ReadSessionStoreOptions } from './sessions-store-read.js';
export * from './sessions-store.js';
export type { StorePin } from './sessions-store-replace.js';
export * from './archive.js';
export * from './lock.js';
export { FILE_LOCK_ORPHAN_GRACE_MS, type FileLockRecord } from './file-lock.js';
export { describeHolder } from './lock-describe.js';
export { DEFAULT_STALE_MS, LOCK_SUFFIX, foreignLockContent, inspectLock, mayTakeOver, readLockOwner, removeLockFolder, type LockInfo, type LockKind, type LockOwnerInfo, type LockOwnerRecord, type TakeoverPolicy } from './lock-owner.js';
export * from './lock-admin.js';
export * from './transcript.js';
export * from './transcript-read.js';
export * from './transcript-follow.js';
export { readFirstLineRecord, readTranscriptHead } from './transcript-head.js';
export { copyRegularFile, describeFileKind, fileKindOf, isTooLargeToRead, lstatKind, notRegularFileError, openRegularFile, readRegularFile, type FileKind } from './regular-file.js';
export { entryHash, entryTextHash, journalPathFor, journalledEntry, readJournal, JOURNAL_SUFFIX, type JournalSession } from './journal.js';
export { mountMemoryVolume, unmountMemoryVolume, memoryVolumeFor, isInMemory, storedFileSizeSync, type MemoryVolume } from './memory-volume.js';
export { readRemovedMemories, readRemovedMemoryFile, removedMemoryPathFor, REMOVED_MEMORY_SUFFIX, type RemovedMemory, type RemovedMemories } from './removed-memory.js';
export { addRecordRoute, duplicateKeyOfRecord } from './record-route.js';
export { repeatedTopLevelKeys, type RepeatedKey } from './repeated-keys.js';
