package reqdetect

// langKO is the cue table of Korean (rule 9; languages.go reads it).
var langKO = &langTable{
	code: "ko", name: "Korean", presented: "첨부한 첨부된 첨부합니다 첨부드", attach: "첨부파일", delivery: "첨부 업로드 내보내 저장 제출 납품 다운로드",
	send: "보내 공유 전송", output: "작성 만들 생성 정리해", transform: "변환 번역", input: "읽 요약 분석 비교 검토 확인 사용 실행",
	reply: "답변 답해 답장 설명 알려", inline: "여기 채팅 인라인 답변에 댓글로 댓글창 채팅으로", negators: "말고 말아 마세요 마십시오 않 금지 없이 마시 없음 없습니다 아닙니다 아니",
	fileWords: "파일", model: "템플릿 양식", modelAfter: "처럼 같은 참고 기반 바탕 템플릿으로", destPreps: "로 으로", namingPreps: "로 으로",
	sourceAfter: "에서", productNouns: "옵션 기능 명령 도구 스크립트 버튼 프로그램", featureVerbs: "추가 구현 지원", howTo: "어떻게 방법",
	doneAfter: "했 됐 한_", deliverables: "산출물 결과물 제출물 출력_파일", inputs: "배경 참고_자료 참고자료 입력 입력_파일 첨부_파일 현황 입력_데이터 입력_자료 참고_문서",
	edit: "수정 업데이트 변경 편집 고쳐 고치", naming: "이름", polite: "주세요 주십시오 부탁", repo: "브랜치 커밋 저장소 리포지토리 풀_리퀘스트 풀리퀘스트 테스트",
	bug: "버그", pointers: "이 그",
	other: "다른 추가",
}
