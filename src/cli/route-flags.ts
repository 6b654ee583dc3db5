// Route flags shared by `route resolve|explain` and `send`: turns --channel/--peer/... into the
// raw object that routing's normaliser (the same one NDJSON input goes through) accepts.

import { InvalidArgumentError, type Command } from 'commander';
import { normalizePeer } from '../routing/index.js';

export interface RouteFlagValues {
  channel?: string;
  account?: string;
  peer?: string;
  parentPeer?: string;
  guild?: string;
  team?: string;
  roles?: string;
  thread?: string;
}

export function addRouteFlags(command: Command, channelRequired: boolean): Command {
  const channel = channelRequired ? command.requiredOption.bind(command) : command.option.bind(command);
  channel('--channel <channel>', 'channel of the message (telegram, discord, slack, …)', channelFlag);
  return command
    .option('--account <id>', 'account id on that channel (default: "default")')
    .option('--peer <kind:id>', 'conversation: direct:<id>, group:<id> or channel:<id>', peerFlag)
    .option('--parent-peer <kind:id>', 'parent conversation of a thread (inherits its binding)', peerFlag)
    .option('--guild <id>', 'guild (Discord server) id')
    .option('--team <id>', 'team (Slack workspace / MS Teams) id')
    .option('--roles <r1,r2>', "the sender's role ids, comma-separated")
    .option('--thread <id>', 'thread id (the session key gets a :thread:<id> suffix)');
}

/** A blank channel names no channel: a usage error while parsing, as a bad --peer is. */
export function channelFlag(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('the channel is blank (e.g. --channel telegram)');
  return value;
}

/**
 * A flag is typed by a person, so a bad one is a usage error (exit 2) caught while parsing, not
 * bad input data; an empty id (`direct:`) would address a conversation with nobody.
 */
export function peerFlag(value: string): string {
  let peer;
  try {
    peer = normalizePeer(value, 'peer');
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  if (peer === undefined || peer.id === '') throw new InvalidArgumentError('the id after "kind:" is empty (e.g. direct:123)');
  return value;
}

/** The flags as a raw route input; peers stay "kind:id" strings for the normaliser to check. */
export function routeInputFromFlags(flags: RouteFlagValues): Record<string, unknown> {
  const raw: Record<string, unknown> = { channel: flags.channel };
  if (flags.account !== undefined) raw.accountId = flags.account;
  if (flags.peer !== undefined) raw.peer = flags.peer;
  if (flags.parentPeer !== undefined) raw.parentPeer = flags.parentPeer;
  if (flags.guild !== undefined) raw.guildId = flags.guild;
  if (flags.team !== undefined) raw.teamId = flags.team;
  if (flags.roles !== undefined) raw.memberRoleIds = flags.roles.split(',').map((role) => role.trim()).filter(Boolean);
  if (flags.thread !== undefined) raw.threadId = flags.thread;
  return raw;
}
