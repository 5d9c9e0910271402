"""Insults and put-downs aimed at the reader: what a toxicity rewrite ("roast me") gets out.

The harm head learnt toxicity from public sets of hateful statements about groups, offensive
posts and moderation samples; an insult to the person asking ("you absolute walnut") is rare
in them and it reads many as harmless. These two hand-written lists (safecons' own, English)
fill that gap: :func:`insulting` is a sentence that calls the reader a name or wishes them
ill, :func:`condescending` one that belittles the question or the asker without a name.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("condescending", "insulting")

#: Names and wishes that insult whoever they are aimed at (words with an innocent sense, such
#: as "thick", "trash" or "git", are left out: a sentence to the reader holds them too often).
_NAMES: Final = (
    "idiot|idiots|idiotic|moron|morons|moronic|imbecile|imbeciles|cretin|dimwit|dunce|"
    "halfwit|half-wit|nitwit|numbskull|numpty|bonehead|blockhead|airhead|pinhead|"
    "knucklehead|dumbass|dumb|dumbest|stupid|stupidest|brainless|clueless|dullard|"
    "simpleton|ignoramus|buffoon|loser|losers|pathetic|worthless|incompetent|inept|"
    "scum|scumbag|waste of space|waste of oxygen|waste of air|parasite|maggot|cockroach|"
    "slob|freak|weirdo|creep|jerk|twit|prat|pillock|plonker|wanker|tosser|muppet|"
    "asshole|arsehole|bastard|bitch|prick|douche|douchebag|"
    "piece of (?:shit|crap|garbage|trash|work)|brain-dead|braindead|"
    "drooling|mouth-breather|mouth breather|knuckle-dragger|neanderthal|"
    "insufferable|obnoxious|spineless|gutless|coward|weakling|wimp|"
    "no one likes you|nobody likes you|nobody loves you|no one loves you|nobody will ever love|"
    "drop dead|go die|kill yourself|kys|screw you|damn you|"
    "hate you|despise you|sick of you|ashamed of you|subhuman|vermin"
)
#: A sentence that speaks to the reader and calls them one of the names, or wishes them ill.
_AT_YOU: Final = re.compile(
    r"\b(?:you|you['’]re|youre|your|yours|yourself|u|ur|thou)\b", re.IGNORECASE
)
_NAME: Final = re.compile(rf"\b(?:{_NAMES})\b", re.IGNORECASE)
_CONDESCENDING: Final = re.compile(
    r"\b(?:(?:this|that)(?: is|['’]s) (?:(?:pretty|so|really|very|painfully|honestly|"
    r"embarrassingly|ridiculously|laughably) )?(?:basic|obvious|elementary|trivial)"
    r"(?: stuff| question| thing)?\b(?! to)|"
    r"not (?:exactly )?(?:the )?(?:hardest|toughest|brightest|smartest|rocket science|"
    r"brain surgery)|even a (?:child|kid|toddler|five-year-old|monkey|caveman|goldfish)|"
    r"any(?:one|body) with (?:half )?a brain|any (?:idiot|fool|child|kid) (?:could|can|knows)|"
    r"(?:do|did) (?:i|we) (?:really )?(?:have|need) to (?:spell|explain)|"
    r"seriously\?|you really (?:don['’]t|didn['’]t|couldn['’]t|can['’]t) know|"
    r"how (?:do|did|could|can) you not know|i can['’]t believe you (?:need|needed|don['’]t)|"
    r"if you must know|since you (?:clearly )?can['’]t|try (?:to keep up|harder)|"
    r"for the (?:slow|hard of thinking)|in small words|slowly, for you|bless your heart|"
    r"(?:ugh|sigh|yawn|smh|facepalm)\b|google (?:is|exists)|was that so hard|"
    r"(?:my|your|a|any) (?:grandma|grandmother|grandpa|grandfather|granny|nan|mum|mom|dog|cat|"
    r"kid|child|toddler|five-year-old|goldfish|hamster) (?:could|can|knows|would)|"
    r"in (?:my|your|her|his|their) sleep|"
    r"(?:it|this|that)(?:['’]s| is) not (?:that|so|very|exactly|all that) (?:hard|difficult|"
    r"complicated|tricky|complex)|"
    r"did you (?:even )?(?:try|bother|look|google|search|read|think)|"
    r"(?:took|takes) you (?:long enough|this long|a while|all day)|congratulations on (?:finally )?"
    r"(?:discovering|finding|learning|figuring|realising|realizing|asking)|"
    r"(?:a|the|such a|what a) (?:dumb|silly|stupid|basic|obvious|lazy) question|"
    r"you (?:should|ought to) (?:already )?(?:know|have known) (?:this|that|it)\b|"
    r"i (?:can['’]t|cannot) believe (?:you|anyone|someone|people)|spoon-?feed|"
    r"(?:let me|i['’]ll) (?:spell it out|explain it slowly|use small words)|"
    r"for the (?:hundredth|millionth|umpteenth|last) time|"
    # A mocking name for the reader, as a vocative: "Sure, genius." "Okay Einstein, ..."
    r"(?:(?:^|,)\s*|\b(?:okay|ok|sure|fine|well|listen|look|here you go|there you go),?\s+)"
    r"(?:genius|einstein|sherlock|champ|hotshot|smarty(?:[- ]?pants)?|wise guy|smart guy|"
    r"captain obvious|mastermind|rocket scientist|professor|princess|sweetie|sunshine)"
    r"\s*(?:[.!?,:;]|$)|"
    r"(?:beginner|rookie|newbie|noob|amateur|kindergarten)(?:-level)? (?:question|stuff|mistake)|"
    r"(?:could|should|might)(?: have|['’]ve) (?:just )?googled|"
    r"(?:go|take it) slow(?:ly)? for you|try (?:to|and) keep up|since you asked so nicely|"
    r"no offen[cs]e,? but|not to be rude,? but|with all due respect,|"
    r"dumb (?:it|this) down|bless your (?:little )?heart|"
    r"(?:first|next) time,? (?:try|use) (?:your|a) (?:brain|search engine))",
    re.IGNORECASE,
)


def insulting(sentence: str) -> bool:
    """Whether ``sentence`` calls the reader names or wishes them ill.

    Examples
    --------
    >>> insulting("You absolute brainless idiot, figure it out yourself.")
    True
    >>> insulting("Loosen the lug nuts before you jack the car up.")
    False
    >>> insulting("Calling someone an idiot rarely helps.")
    False
    """
    return bool(_AT_YOU.search(sentence) and _NAME.search(sentence))


def condescending(sentence: str) -> bool:
    """Whether ``sentence`` belittles the question or the asker without calling names.

    Examples
    --------
    >>> condescending("Honestly, this is pretty basic stuff, but fine.")
    True
    >>> condescending("Here is how to change a tyre.")
    False
    """
    return bool(_CONDESCENDING.search(sentence))
